"""The report's first panel when a run has thresholds: passed or failed, and each threshold with its
value, its bound and its outcome (summary.json's `verdict`)."""

from html import escape

from dimster.report.page import data_table, panel
from dimster.verdict.judge import quantity


def verdict_panel(summary: dict) -> str:
    verdict = summary.get("verdict")
    if not verdict:
        return ""
    outcome = "passed" if verdict["passed"] else "failed"
    badge = f'<span class="badge {"completed" if verdict["passed"] else "failed"}">{outcome}</span>'
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
            "held" if r["passed"] else f'<span class="bad">breached</span>{_note(r)}',
        ]
        for r in results
    ]
    return panel("Thresholds", html + data_table(["threshold", "value", "bound", "outcome"], rows, text_columns=1))


def _note(result: dict) -> str:
    return f" ({escape(result['note'])})" if result.get("note") else ""


def campaign_verdict_section(verdict: dict | None) -> str:
    """The campaign page's thresholds: each point passed, failed (with what it breached) or not judged."""
    if not verdict:
        return ""
    rows = []
    for point in verdict.get("points") or []:
        if point["passed"] is None:
            outcome, breached = f"not judged ({escape(point['status'])})", ""
        else:
            outcome = "held" if point["passed"] else '<span class="bad">breached</span>'
            breached = "; ".join(
                f"<code>{escape(r['threshold'])}</code>: {escape(r['note'] or quantity(r['value'], r['unit']))}"
                for r in point["thresholds"]
                if not r["passed"]
            )
        rows.append([str(point["point"]), escape(point["label"]), outcome, breached])
    badge = f'<span class="badge {"completed" if verdict["passed"] else "failed"}">'
    badge += f"{'passed' if verdict['passed'] else 'failed'}</span>"
    html = f"<p>Each point judged on the mean of its repeats {badge}</p>"
    table = data_table(["point", "values", "outcome", "breached (mean)"], rows, text_columns=4)
    return f'<section id="thresholds"><h2>Thresholds</h2>{html}{table}</section>'
