"""The report's first panel when a run has thresholds: passed or failed, and each threshold with its
value, its bound and its outcome (summary.json's `verdict`)."""

from html import escape

from dimster.report.page import data_table, panel
from dimster.verdict.campaign import campaign_outcome, point_outcome
from dimster.verdict.judge import outcome, quantity

BREACHED = '<span class="bad">breached</span>'
UNDECIDED = '<span class="warn">undecided</span>'  # a latency or rate of a saturated load generator


def verdict_panel(summary: dict) -> str:
    verdict = summary.get("verdict")
    if not verdict:
        return ""
    badge = _badge(outcome(verdict))
    results = verdict.get("thresholds") or []
    held = sum(bool(r["passed"]) for r in results)
    html = f"<p>{held} of {len(results)} threshold(s) held {badge}</p>"
    if verdict.get("aborted_by"):
        html += f"<p>Stopped early: <code>{escape(verdict['aborted_by'])}</code> could not pass any more.</p>"
    rows = [
        [
            f"<code>{escape(r['threshold'])}</code>",
            escape(quantity(r["value"], r["unit"])),
            escape(quantity(r["bound"], r["unit"])),
            _threshold_outcome(r),
        ]
        for r in results
    ]
    return panel("Thresholds", html + data_table(["threshold", "value", "bound", "outcome"], rows, text_columns=1))


def _threshold_outcome(result: dict) -> str:
    """held, breached or undecided (a saturated load generator), with the note that says why."""
    note = f" ({escape(result['note'])})" if result.get("note") else ""
    if result["passed"] is None:
        return UNDECIDED + note
    return "held" if result["passed"] else BREACHED + note


def _badge(word: str) -> str:
    kind = {"passed": "completed", "undecided": "undecided"}.get(word, "failed")
    return f'<span class="badge {kind}">{word}</span>'


def campaign_verdict_section(verdict: dict | None) -> str:
    """The campaign page's thresholds: each point passed, failed (with what it breached) or not judged."""
    if not verdict:
        return ""
    rows = []
    for point in verdict.get("points") or []:
        word = point_outcome(point)
        if word == "not judged":
            shown, breached = f"not judged ({escape(point['status'])})", ""
        else:
            shown = {"passed": "held", "failed": BREACHED, "undecided": UNDECIDED}[word]
            breached = "; ".join(
                f"<code>{escape(r['threshold'])}</code>: {escape(r['note'] or quantity(r['value'], r['unit']))}"
                for r in point["thresholds"]
                if not r["passed"]
            )
        rows.append([str(point["point"]), escape(point["label"]), shown, breached])
    html = f"<p>Each point judged on the mean of its repeats {_badge(campaign_outcome(verdict))}</p>"
    table = data_table(["point", "values", "outcome", "breached (mean)"], rows, text_columns=4)
    return f'<section id="thresholds"><h2>Thresholds</h2>{html}{table}</section>'
