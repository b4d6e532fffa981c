"""Conditions for `dimster wait --until`. In the thresholds' grammar and figure names, comparisons
joined by `and` (`consumed.rate >= 0.95 * produced.rate and e2e.p99 < 50ms`), each figure read from
the run's status as it is now (LIVE_FIGURES); or, as before, small arithmetic over the status's own
fields (`backlog<1000`, `consRate>=0.95*pubRate or elapsedSeconds>60`), parsed with `ast`, never eval."""

import ast
import operator
import re
from dataclasses import dataclass

from dimster.coordinator.control.status_schema import NAMES
from dimster.errors import DimsterError
from dimster.verdict.expressions import Comparison, parse_threshold
from dimster.verdict.figures import FIGURES, status_value

# The figures a status snapshot holds (Figure.live): rates and latencies of the last seconds (the
# console's), counts so far, lag and backlog now. A `.max` figure is the run's own (LiveJudge).
LIVE_FIGURES = tuple(sorted(name for name, f in FIGURES.items() if f.live and not name.endswith(".max")))
DOTTED = re.compile(r"[A-Za-z_]\.[A-Za-z0-9]")  # a figure name of the thresholds' grammar

FIELDS = NAMES  # the status schema's numeric fields
_COMPARE = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


class Unknown(Exception):
    """A field has no value yet (e.g. no latency measured): the condition is not met."""


@dataclass(frozen=True)
class Condition:
    text: str
    comparisons: tuple[Comparison, ...] = ()  # the thresholds' grammar, all of which must hold
    fields: ast.Expression | None = None  # else the status fields' arithmetic


def parse_condition(text: str) -> Condition:
    """A condition in the thresholds' grammar, else in the status fields' (one error line naming what
    would be valid, in the grammar the text looks written in)."""
    try:
        comparisons = tuple(parse_threshold(part) for part in re.split(r"\s+and\s+", text.strip()))
    except ValueError as e:
        if DOTTED.search(text):
            raise DimsterError(f"--until '{text}': {e}") from None
        return Condition(text, fields=_parse_fields(text))
    for name in (name for comparison in comparisons for name in comparison.figures()):
        if name not in LIVE_FIGURES:
            raise DimsterError(
                f"--until '{text}': '{name}' has no value while a run goes; figures a wait can read: "
                f"{', '.join(LIVE_FIGURES)}"
            )
    return Condition(text, comparisons)


def _parse_fields(text: str) -> ast.Expression:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise DimsterError(
            f"--until '{text}': not a condition such as 'backlog<1000' or 'consRate>=0.95*pubRate'"
        ) from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in FIELDS:
            raise DimsterError(f"--until '{text}': unknown field '{node.id}' (fields: {', '.join(FIELDS)})")
        allowed = (
            ast.Expression,
            ast.Compare,
            ast.BoolOp,
            ast.BinOp,
            ast.UnaryOp,
            ast.Name,
            ast.Constant,
            ast.Load,
            ast.And,
            ast.Or,
            ast.Not,
            ast.USub,
            *_COMPARE,
            *_ARITH,
        )
        if not isinstance(node, allowed) or (
            isinstance(node, ast.Constant) and not isinstance(node.value, int | float)
        ):
            raise DimsterError(f"--until '{text}': only numbers, status fields, + - * /, comparisons, and/or/not")
    return tree


def holds(condition: Condition, status: dict) -> bool:
    """Whether the condition holds on `status`; a figure or field without a value yet makes it false."""
    if condition.fields is None:
        values = {n: status_value(FIGURES[n], status) for c in condition.comparisons for n in c.figures()}
        return all(c.judge(values)[2] is True for c in condition.comparisons)
    try:
        return bool(_value(condition.fields.body, status))
    except (Unknown, ZeroDivisionError):
        return False


def _value(node, status: dict):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        value = status.get(node.id)
        if value is None:
            raise Unknown(node.id)
        return value
    if isinstance(node, ast.UnaryOp):
        value = _value(node.operand, status)
        return not value if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.BinOp):
        return _ARITH[type(node.op)](_value(node.left, status), _value(node.right, status))
    if isinstance(node, ast.BoolOp):
        values = (_value(v, status) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    left = _value(node.left, status)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = _value(right_node, status)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True
