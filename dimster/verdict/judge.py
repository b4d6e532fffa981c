"""Judging thresholds on a run's figures: each threshold's values, bound and outcome, and whether the
run passed (docs/workloads.md, "Thresholds"; the shape is summary.json's `verdict`)."""

from collections.abc import Callable, Iterable

from dimster.verdict.expressions import parse_threshold
from dimster.verdict.figures import FIGURES, summary_value

Spec = tuple[str, bool]  # a threshold's text, and whether it aborts the run when it cannot pass any more


def specs_of(thresholds: Iterable[object]) -> list[Spec]:
    """Thresholds as a workload file or run.json holds them: a text, or {threshold, abortOnFail}."""
    specs = []
    for item in thresholds:
        if isinstance(item, str):
            specs.append((item, False))
        elif isinstance(item, dict) and isinstance(item.get("threshold"), str):
            specs.append((item["threshold"], bool(item.get("abortOnFail", False))))
    return specs


def judge(specs: list[Spec], value_of: Callable[[str], float | None], aborted_by: str | None = None) -> dict:
    """Each threshold judged on the figures `value_of` gives; a figure with no value fails it."""
    results = []
    for text, abort_on_fail in specs:
        comparison = parse_threshold(text)
        values = {name: value_of(name) for name in comparison.figures()}
        left, right, held = comparison.judge(values)
        missing = [name for name, value in values.items() if value is None]
        note = f"no value: the run has no {', '.join(missing)}" if missing else None
        if note is None and held is None:
            note = "no value: a division by zero"
        results.append(
            {
                "threshold": text,
                "figures": values,
                "value": left,
                "bound": right,
                "unit": comparison.unit,
                "passed": bool(held),
                "abortOnFail": abort_on_fail,
                "note": note,
            }
        )
    passed = all(r["passed"] for r in results) and aborted_by is None
    return {"passed": passed, "aborted_by": aborted_by, "thresholds": results}


def judge_summary(thresholds: Iterable[object], summary: dict, aborted_by: str | None = None) -> dict | None:
    """summary.json's verdict: None when the run has no thresholds."""
    specs = specs_of(thresholds)
    if not specs:
        return None
    return judge(specs, lambda name: summary_value(FIGURES[name], summary), aborted_by)


def not_judged(specs: list[Spec], why: str) -> dict:
    """A verdict for thresholds that could not be judged (no summary): each fails, saying why."""
    verdict = judge(specs, lambda _name: None)
    for result in verdict["thresholds"]:
        result["note"] = why
    return verdict


def breaches(verdict: dict) -> list[str]:
    """One line per threshold that did not hold: 'e2e.p99 < 50ms: 73.2 ms'."""
    return [
        f"{r['threshold']}: {r['note'] or quantity(r['value'], r['unit'])}"
        for r in verdict.get("thresholds", [])
        if not r["passed"]
    ]


def quantity(value: float | None, unit: str = "") -> str:
    """A value with its unit, as many decimals as it has up to two ("12.3 ms", "333.1 msg/s", "0");
    small values keep three significant digits ("0.004 MB/s")."""
    if value is None:
        return "no value"
    text = f"{value:,.2f}" if abs(value) >= 1 or value == 0 else f"{value:.3g}"
    if "." in text and "e" not in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text} {unit}".rstrip()
