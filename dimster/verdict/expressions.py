"""Threshold expressions: `e2e.p99 < 50ms`, `consumed.rate >= 0.95 * produced.rate`, `lost == 0`.

One comparison of two sums of figures and quantities (+ - * / and parentheses). Units are written
and checked: a latency's bound needs ms or s, a rate's msg/s or MB/s, a count none; `%` is a number
(95% = 0.95). Every problem is a ValueError with one line saying what would be valid."""

import functools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lark import Lark, Token, Transformer, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.exceptions import VisitError

from dimster.verdict.figures import BYTE_RATE, FIGURES, MSG_RATE, NUMBER, TIME, UNITS
from dimster.yamlfile import closest

PERCENT = "percent"  # a tolerance's relative form; a number (a fraction) in a threshold
GRAMMAR = r"""
comparison: sum COMP sum
?sum: product | sum "+" product -> add | sum "-" product -> sub
?product: unary | product "*" unary -> mul | product "/" unary -> div
?unary: atom | "-" unary -> neg
?atom: quantity | FIGURE -> figure | "(" sum ")"
quantity: NUMBER UNIT?
COMP: "<=" | ">=" | "==" | "!=" | "<" | ">"
UNIT: "msg/s" | "MB/s" | "ms" | "s" | "%"
FIGURE: /[A-Za-z_][A-Za-z0-9_]*(\.(p\d+(\.\d+)?|[A-Za-z_][A-Za-z0-9_]*))*/
NUMBER: /(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/
%ignore " "
"""
SCALE = {"ms": (1.0, TIME), "s": (1000.0, TIME), "msg/s": (1.0, MSG_RATE), "MB/s": (1.0, BYTE_RATE)}
UNIT_NAMES = "ms, s, msg/s, MB/s, %"
COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}  # fmt: skip
WHAT = {TIME: "a latency", MSG_RATE: "a rate", BYTE_RATE: "a byte rate", NUMBER: "a count"}
EXAMPLE = {TIME: "50ms or 0.05s", MSG_RATE: "1000msg/s", BYTE_RATE: "10MB/s"}


@functools.cache
def _parser() -> Lark:
    return Lark(GRAMMAR, parser="lalr", start=["comparison", "quantity"], maybe_placeholders=False)


@dataclass(frozen=True)
class Node:
    """A side's term: a constant (`figure` None, `value` set), a figure, or `op` over `args`."""

    dim: str
    value: float | None = None
    figure: str | None = None
    op: str | None = None
    args: tuple["Node", ...] = ()

    def figures(self) -> list[str]:
        own = [self.figure] if self.figure else []
        return own + [name for arg in self.args for name in arg.figures()]

    def evaluate(self, values: Mapping[str, float | None]) -> float | None:
        if self.figure:
            return values.get(self.figure)
        if self.op is None:
            return self.value
        args = [arg.evaluate(values) for arg in self.args]
        if any(a is None for a in args):
            return None
        if self.op == "neg":
            return -args[0]  # type: ignore[operator]
        left, right = args
        assert left is not None and right is not None
        if self.op == "div":
            return None if right == 0 else left / right
        return {"add": operator.add, "sub": operator.sub, "mul": operator.mul}[self.op](left, right)


@dataclass(frozen=True)
class Comparison:
    text: str
    left: Node
    op: str
    right: Node

    @property
    def unit(self) -> str:
        return UNITS[self.left.dim]

    def figures(self) -> list[str]:
        return list(dict.fromkeys(self.left.figures() + self.right.figures()))

    def judge(self, values: Mapping[str, float | None]) -> tuple[float | None, float | None, bool | None]:
        """(left, right, whether it holds); None where a figure has no value."""
        left, right = self.left.evaluate(values), self.right.evaluate(values)
        held = None if left is None or right is None else COMPARE[self.op](left, right)
        return left, right, held


class _Build(Transformer):
    def quantity(self, items: list[Token]) -> Node:
        value = float(items[0])
        unit = str(items[1]) if len(items) > 1 else ""
        if unit == "%":
            return Node(NUMBER, value / 100)
        scale, dim = SCALE.get(unit, (1.0, NUMBER))
        return Node(dim, value * scale)

    def figure(self, items: list[Token]) -> Node:
        name = str(items[0])
        if name not in FIGURES:
            raise ValueError(f"no figure '{name}'{closest(name, FIGURES)}: figures are listed in docs/workloads.md")
        return Node(FIGURES[name].dim, figure=name)

    def neg(self, items: list[Node]) -> Node:
        return Node(items[0].dim, op="neg", args=(items[0],))

    def add(self, items: list[Node]) -> Node:
        return self._same("add", "+", *items)

    def sub(self, items: list[Node]) -> Node:
        return self._same("sub", "-", *items)

    def mul(self, items: list[Node]) -> Node:
        left, right = items
        if NUMBER not in (left.dim, right.dim):
            raise ValueError(f"{_what(left)} times {_what(right)} is no figure: one side of * must be a number")
        return Node(right.dim if left.dim == NUMBER else left.dim, op="mul", args=(left, right))

    def div(self, items: list[Node]) -> Node:
        left, right = items
        if left.dim == right.dim:
            return Node(NUMBER, op="div", args=(left, right))
        if right.dim == NUMBER:
            return Node(left.dim, op="div", args=(left, right))
        raise ValueError(f"{_what(left)} divided by {_what(right)} is no figure: divide by the same kind or a number")

    def _same(self, op: str, sign: str, left: Node, right: Node) -> Node:
        if left.dim != right.dim:
            raise ValueError(f"{_what(left)} {sign} {_what(right)}: both sides of {sign} must be of one kind")
        return Node(left.dim, op=op, args=(left, right))


def _what(node: Node) -> str:
    return f"{node.figure} ({WHAT[node.dim]})" if node.figure else WHAT[node.dim].replace("a count", "a number")


@functools.lru_cache(maxsize=256)  # pure, and read at every access of Threshold.comparison
def parse_threshold(text: str) -> Comparison:
    """The comparison `text` says, its units checked; ValueError with one line when it is not one."""
    tree = _parse(text, "comparison")
    try:
        left, comp, right = _Build().transform(tree).children
    except VisitError as e:  # lark wraps a transformer's error: ours are ValueErrors, anything else a bug
        if isinstance(e.orig_exc, ValueError):
            raise ValueError(str(e.orig_exc)) from None
        raise e.orig_exc from e
    comparison = Comparison(text, left, str(comp), right)
    if left.dim != right.dim:
        raise ValueError(_unit_mismatch(left, right))
    if not comparison.figures():
        raise ValueError("a threshold compares a figure with a bound, as 'e2e.p99 < 50ms'")
    return comparison


def _unit_mismatch(left: Node, right: Node) -> str:
    figure_side, other = (left, right) if left.figure or left.op else (right, left)
    name = figure_side.figures()[0] if figure_side.figures() else "the left side"
    if figure_side.dim == NUMBER:
        return f"{name} is a count: drop the unit of its bound"
    if other.dim == NUMBER and not other.figures():
        return f"{name} is {WHAT[figure_side.dim]}: write its bound with a unit, as {EXAMPLE[figure_side.dim]}"
    return f"{name} is {WHAT[figure_side.dim]}, compared with {_what(other)}: compare figures of one kind"


def parse_quantity(text: str) -> tuple[float, str]:
    """A quantity with its unit, in canonical units: '50ms' -> (50.0, TIME), '2s' -> (2000.0, TIME),
    '10%' -> (0.1, PERCENT), '7' -> (7.0, NUMBER)."""
    node = _Build().transform(_parse(text, "quantity"))
    return (node.value or 0.0, PERCENT) if text.strip().endswith("%") else (node.value or 0.0, node.dim)


def _parse(text: str, start: str):
    try:
        return _parser().parse(text, start=start)
    except UnexpectedCharacters as e:
        got = text[e.column - 1 :].split(" ")[0] or text[e.column - 1]
        raise ValueError(f"unexpected '{got}' at column {e.column} (units: {UNIT_NAMES})") from None
    except UnexpectedToken as e:
        if e.token.type == "$END":
            raise ValueError(_incomplete(start)) from None
        where = f"unexpected '{e.token}' at column {e.column}"
        if str(e.token) in ("and", "or", "&&", "||"):
            raise ValueError(f"{where}: a threshold is one comparison (write two thresholds)") from None
        if text[: e.column - 1].rstrip()[-1:].isdigit():
            raise ValueError(f"{where} (units: {UNIT_NAMES})") from None
        raise ValueError(f"{where}: {_incomplete(start)}") from None
    except UnexpectedInput as e:
        raise ValueError(f"cannot read it at column {e.column}: {_incomplete(start)}") from None


def _incomplete(start: str) -> str:
    if start == "quantity":
        return f"a quantity is a number with a unit ({UNIT_NAMES}), as 10% or 5ms"
    return "a threshold compares a figure with a bound, as 'e2e.p99 < 50ms'"
