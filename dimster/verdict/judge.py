"""Judging thresholds on a run's figures: each threshold's values, bound and outcome, and whether the
run passed (docs/workloads.md, "Thresholds"; the shape is summary.json's `verdict`)."""

from collections.abc import Callable, Iterable

from dimster.verdict.expressions import parse_threshold
from dimster.verdict.figures import FIGURES, NUMBER, summary_value

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


def judge(
    specs: list[Spec],
    value_of: Callable[[str], float | None],
    aborted_by: str | None = None,
    undecided: str | None = None,
) -> dict:
    """Each threshold judged on the figures `value_of` gives; a figure with no value fails it. With
    `undecided` (why the phase's latencies and rates cannot tell), a threshold on a latency or a rate is
    neither passed nor failed (`passed` None) and the run does not pass."""
    results = []
    for text, abort_on_fail in specs:
        comparison = parse_threshold(text)
        values = {name: value_of(name) for name in comparison.figures()}
        left, right, held = comparison.judge(values)
        missing = [name for name, value in values.items() if value is None]
        note = f"no value: the run has no {', '.join(missing)}" if missing else None
        if note is None and held is None:
            note = "no value: a division by zero"
        passed: bool | None = bool(held)
        if undecided and any(FIGURES[name].dim != NUMBER for name in values):
            passed, note = None, undecided
        results.append(
            {
                "threshold": text,
                "figures": values,
                "value": left,
                "bound": right,
                "unit": comparison.unit,
                "passed": passed,
                "abortOnFail": abort_on_fail,
                "note": note,
            }
        )
    passed = all(r["passed"] for r in results) and aborted_by is None
    return {"passed": passed, "aborted_by": aborted_by, "thresholds": results}


def saturated_reason(summary: dict) -> str | None:
    """Why latency and rate verdicts on the run's measured phase cannot tell: its load generator was
    saturated (summary.json's `generator`, pipeline/generator.py). None when it kept its schedule."""
    measured = (summary.get("generator") or {}).get("measure") or {}
    if not measured.get("saturated") or not measured.get("seconds"):
        return None
    share = measured["saturated_seconds"] / measured["seconds"]
    workers = measured.get("workers") or {}
    worst = max(workers.items(), key=lambda kv: kv[1].get("saturated_seconds") or 0, default=None)
    detail = ""
    if worst is not None:
        w, figures = worst
        wait, cores = figures.get("wait_share_max") or 0.0, figures.get("cpu_cores") or 0.0
        detail = f"; worker {w}: its threads waited up to {wait:.0%} of a report to run, its CPU {cores:.1f} cores"
    return undecided_because(f"{share:.0%} of the measured phase{detail}")


def undecided_because(saturated_for: str) -> str:
    """The note of a latency or rate left undecided: the load generator was saturated for `saturated_for`."""
    return (
        f"undecided: the load generator was saturated for {saturated_for}: the figure measures dimster as well "
        "as Kafka (saturatedPhases: judge insists)"
    )


def judge_summary(
    thresholds: Iterable[object], summary: dict, aborted_by: str | None = None, judge_saturated: bool = False
) -> dict | None:
    """summary.json's verdict: None when the run has no thresholds. Latencies and rates of a saturated
    measured phase are undecided unless `judge_saturated` (the workload's `saturatedPhases: judge`)."""
    specs = specs_of(thresholds)
    if not specs:
        return None
    undecided = None if judge_saturated else saturated_reason(summary)
    return judge(specs, lambda name: summary_value(FIGURES[name], summary), aborted_by, undecided)


def outcome(verdict: dict) -> str:
    """`passed`, `failed` (a threshold breached, or the run stopped early) or `undecided` (none breached,
    but a latency or rate could not tell: a saturated load generator)."""
    if verdict["passed"]:
        return "passed"
    breached = any(r["passed"] is False for r in verdict.get("thresholds") or [])
    return "failed" if breached or verdict.get("aborted_by") else "undecided"


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
