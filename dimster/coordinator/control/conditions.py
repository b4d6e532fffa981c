"""Conditions for `dimster wait --until`: small arithmetic comparisons over the run's status,
such as `backlog<1000` or `consRate>=0.95*pubRate and e2eP99Ms<50`. Parsed with `ast`, never eval."""

import ast
import operator

from dimster.coordinator.control.status_schema import NAMES
from dimster.errors import DimsterError

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


def parse_condition(text: str) -> ast.Expression:
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


def holds(tree: ast.Expression, status: dict) -> bool:
    try:
        return bool(_value(tree.body, status))
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
