"""HTML building blocks shared by the reports: the page with its stylesheet, tables, number formats
and plotly figures embedded so that plotly.js (its cartesian bundle where it can be had) is in the page
exactly once."""

import math
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from dimster import __version__
from dimster.report.plotly_js import script_tags

MISSING = "—"

STYLE = """
:root {
  --fg: #1f2933; --muted: #616e7c; --line: #e4e7eb; --bg: #f5f7fa; --card: #ffffff;
  --good: #1e7e34; --bad: #c62828; --warn: #b26a00;
  --mono: ui-monospace, Menlo, Consolas, monospace;
}
* { box-sizing: border-box; }
body {
  margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
main { max-width: 1320px; margin: 0 auto; padding: 24px 28px 48px; }
header h1 { margin: 0 0 4px; font-size: 26px; }
header .run-id { color: var(--muted); font-family: var(--mono); font-size: 12.5px; }
h2 { font-size: 19px; margin: 34px 0 12px; padding-bottom: 6px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 0 0 8px; }
h3.spaced { margin-top: 16px; }
p.hint { color: var(--muted); margin: 4px 0 12px; }
.badge {
  display: inline-block; padding: 2px 10px; border-radius: 10px; font-size: 13px; font-weight: 600;
  vertical-align: middle; margin-left: 10px; color: #fff; background: var(--warn);
}
.badge.completed { background: var(--good); }
.badge.failed { background: var(--bad); }
.meta, .card, .panel, .chart, .scroll, .box, pre {
  background: var(--card); border: 1px solid var(--line); border-radius: 8px;
}
.meta {
  display: grid; grid-template-columns: repeat(auto-fill, minmax(250px, 1fr)); gap: 6px 24px;
  margin-top: 16px; padding: 12px 16px;
}
.meta div { min-width: 0; overflow-wrap: anywhere; }
.meta span {
  display: block; color: var(--muted); font-size: 11.5px; text-transform: uppercase; letter-spacing: .04em;
}
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(136px, 1fr)); gap: 12px; }
.card { padding: 12px 14px; }
.card .label { color: var(--muted); font-size: 12px; }
.card .value { font-size: 22px; font-weight: 600; margin-top: 2px; }
.card .value small { font-size: 13px; font-weight: 400; color: var(--muted); }
.card.bad .value, span.bad { color: var(--bad); font-weight: 600; }
span.warn { color: var(--warn); font-weight: 600; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(290px, 1fr)); gap: 16px; margin-top: 16px; }
.panel { padding: 12px 16px; }
.chart { padding: 6px 8px; margin-bottom: 16px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { background: #f0f3f7; font-weight: 600; position: sticky; top: 0; }
th.text, td.text { text-align: left; }
td.text { white-space: normal; }
/* label left, value right; a value too long for the label's line takes the next line, and wraps */
.kv, .kv tbody { display: block; }
.kv tr { display: flex; flex-wrap: wrap; column-gap: 8px; }
.kv td { border-bottom: none; padding: 2px 0; white-space: normal; overflow-wrap: anywhere; }
.kv td:first-child { color: var(--muted); text-align: left; flex: 1 1 0; }
.kv td:last-child { margin-left: auto; }
table.faults td[rowspan] { vertical-align: top; }
table.faults tbody + tbody { border-top: 2px solid #cbd2d9; }
table.faults .hint { color: var(--muted); font-size: 12px; }
.scroll { max-height: 440px; overflow: auto; }
.box { overflow-x: auto; }
.notes {
  background: #fff8e1; border: 1px solid #ffe08a; border-radius: 8px; padding: 10px 16px; margin-top: 16px;
}
.notes h3 { color: var(--warn); }
.notes ul { margin: 4px 0; padding-left: 20px; }
pre { padding: 10px 14px; margin: 0; overflow: auto; max-height: 720px; font: 12.5px/1.4 var(--mono); }
pre.wrap { white-space: pre-wrap; word-break: break-all; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
"""

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"scale": 2}}


class Page:
    """An HTML page being built; figures share one embedded copy of plotly.js."""

    def __init__(self, title: str):
        self.title = title
        self.parts: list[str] = []
        self._figures = 0

    def add(self, *html: str) -> None:
        self.parts.extend(html)

    def figure(self, fig: go.Figure) -> str:
        """A figure as a `<div>`; the first one carries plotly.js itself (report/plotly_js.py's bundle)."""
        self._figures += 1
        body = fig.to_html(
            full_html=False, include_plotlyjs=False, config=PLOTLY_CONFIG, div_id=f"figure-{self._figures}"
        )
        scripts = script_tags() if self._figures == 1 else ""
        return f'<div class="chart">{scripts}{body}</div>'

    def render(self) -> str:
        generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(self.title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(self.parts)
            + f"\n<footer>Generated by dimster {escape(__version__)} on {generated}.</footer>\n"
            "</main>\n</body>\n</html>\n"
        )

    def screenshot(self, out: Path, width: int, height: int) -> None:
        """The page as a PNG of `width` x `height` pixels, by headless Chromium (figures without their toolbar)."""
        self.add("<style>.modebar { display: none; }</style>")
        with tempfile.TemporaryDirectory() as scratch:
            html = Path(scratch) / "page.html"
            html.write_text(self.render())
            command = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
            command += [f"--window-size={width},{height}", f"--screenshot={out.resolve()}", html.as_uri()]
            subprocess.run(command, check=True, capture_output=True)


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def integer(value: Any) -> str:
    return MISSING if is_missing(value) else f"{round(float(value)):,}"


def decimal(value: Any, unit: str = "") -> str:
    """A number with as many decimals as make sense for its size."""
    if is_missing(value):
        return MISSING
    number = float(value)
    magnitude = abs(number)
    text = f"{number:,.0f}" if magnitude >= 100 else f"{number:.1f}" if magnitude >= 10 else f"{number:.2f}"
    return f"{text} {unit}".rstrip()


def text(value: Any) -> str:
    return MISSING if is_missing(value) or value == "" else escape(str(value))


def kv_table(rows: Iterable[tuple[str, str]]) -> str:
    """Label/value rows; values are HTML already (use the formatters above)."""
    body = "".join(f"<tr><td>{escape(label)}</td><td>{value}</td></tr>" for label, value in rows)
    return f'<table class="kv">{body}</table>'


def data_table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, text_columns: int = 1) -> str:
    """A table of HTML cells; the first `text_columns` columns are left-aligned text."""
    head = "".join(
        f'<th class="text">{escape(h)}</th>' if i < text_columns else f"<th>{escape(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="text">{c}</td>' if i < text_columns else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def panel(title: str, html: str) -> str:
    return f'<div class="panel"><h3>{escape(title)}</h3>{html}</div>'


def notes_box(title: str, items: Sequence[str]) -> str:
    if not items:
        return ""
    listed = "".join(f"<li>{escape(item)}</li>" for item in items)
    return f'<div class="notes"><h3>{escape(title)}</h3><ul>{listed}</ul></div>'


def unavailable(what: str) -> str:
    return f'<p class="hint">Not available: {escape(what)}.</p>'
