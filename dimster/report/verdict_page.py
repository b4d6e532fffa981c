"""The verdict of `dimster compare --verdict` in HTML: a section with a table per point (each figure
better, worse, the same or undecided, and why), for the comparison of two runs, and a page of its
own for two campaigns."""

from html import escape
from pathlib import Path

from dimster.report.page import Page, data_table, decimal, integer, notes_box
from dimster.verdict.compare import change_text, regression_line, shown_p

STYLE = """<style>
.verdict { font-weight: 600; }
.verdict.worse, td.verdict-worse { color: var(--bad); }
.verdict.better, td.verdict-better { color: var(--good); }
.verdict.undecided, td.verdict-undecided { color: var(--warn); }
td.verdict-worse, td.verdict-better { font-weight: 600; }
#verdict th:last-child { text-align: left; }
#verdict td:last-child { white-space: normal; text-align: left; color: var(--muted); min-width: 260px; }
.badge.regression { background: var(--bad); }
.badge.no-regression { background: var(--good); }
</style>"""


def verdict_section(result: dict) -> str:
    """The regression line, the notes, and a table per compared point."""
    regression = result["regression"]
    badge = "regression" if regression else "no-regression"
    line = escape(regression_line(result))
    hint = (
        f'<p class="hint">Candidate <code>{escape(result["candidate"])}</code> against baseline '
        f"<code>{escape(result['baseline'])}</code>: one-sided Mann-Whitney U tests at alpha "
        f"{result['alpha']:g}, over the repeats when there are enough, else (two runs) over their measured "
        "seconds.</p>"
    )
    tables = "".join(_point_table(point) for point in result["points"])
    return (
        f'{STYLE}<section id="verdict"><h2>Verdict <span class="badge {badge}">{line}</span></h2>{hint}'
        f"{notes_box('Notes', result['notes'])}{tables}</section>"
    )


def _point_table(point: dict) -> str:
    headers = ["figure", "baseline", "candidate", "change", "tolerance", "test", "p", "verdict", "reason"]
    rows = [
        [
            escape(f["figure"]),
            _value(f["baseline"], f["unit"]),
            _value(f["candidate"], f["unit"]),
            change_text(f),
            escape(f["tolerance"]),
            f"{f['test']} ({f['samples'][0]} and {f['samples'][1]})" if f["test"] != "none" else "none",
            _p(shown_p(f)),
            f'<span class="verdict {f["verdict"]}">{f["verdict"]}</span>',
            escape(f["reason"]),
        ]
        for f in point["figures"]
    ]
    title = "" if point["label"] == "run" else f'<h3 class="spaced">{escape(point["label"])}</h3>'
    return f'{title}<div class="box">{data_table(headers, rows)}</div>'


def _value(value: float | None, unit: str) -> str:
    """A count as a whole number, anything else with its unit."""
    return decimal(value, unit) if unit else integer(value)


def _p(p: float | None) -> str:
    return "—" if p is None else f"{p:.2g}"


def figure_verdicts(result: dict) -> dict[str, str]:
    """Figure name -> verdict, of a comparison of two runs (its one point)."""
    return {f["figure"]: f["verdict"] for f in result["points"][0]["figures"]} if result["points"] else {}


def write_verdict_page(result: dict, output: Path) -> Path:
    """A page with the verdict alone (two campaigns: their per-run charts are in each campaign's report)."""
    page = Page("dimster: comparing two campaigns")
    page.add(
        "<header><h1>Comparing two campaigns</h1></header>",
        verdict_section(result),
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(page.render(), encoding="utf-8")
    return output
