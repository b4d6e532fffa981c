"""Several summarized runs side by side in one self-contained HTML file: their key numbers in one
table (a column per run), what differs between their workloads and broker configs, and charts with
one trace per run over the run time."""

from collections.abc import Callable
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from dimster.errors import DimsterError
from dimster.report import charts
from dimster.report.data import RunData, load_run, parse_yaml
from dimster.report.page import MISSING, Page, data_table, decimal, integer, notes_box, text, unavailable
from dimster.report.verdict_page import figure_verdicts, verdict_section

Row = tuple[str, Callable[[RunData], str]]


def default_output() -> Path:
    """`comparison-<UTC time>.html` in the current directory."""
    return Path.cwd() / f"comparison-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.html"


def write_comparison(run_dirs: list[Path], output: Path, verdict: dict | None = None) -> Path:
    """Write the comparison of the runs in `run_dirs` to `output`; returns its path. With the `verdict`
    of `compare --verdict` (two runs), it comes first and the candidate's key numbers are marked."""
    if len(run_dirs) < 2:
        raise DimsterError("compare needs two or more run folders")
    runs = [load_run(run_dir) for run_dir in run_dirs]
    labels = [f"#{i} {run.name}" for i, run in enumerate(runs, start=1)]
    page = Page(f"dimster: comparing {len(runs)} runs")
    page.add(
        f"<header><h1>Comparing {len(runs)} runs</h1></header>",
        notes_box("Notes", _notes(runs, labels)),
        verdict_section(verdict) if verdict else "",
        key_table(runs, labels, figure_verdicts(verdict) if verdict else {}),
        differences(runs, labels),
        overlay_charts(runs, labels, page),
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(page.render(), encoding="utf-8")
    return output


def key_table(runs: list[RunData], labels: list[str], verdicts: dict[str, str] | None = None) -> str:
    """A row per key number, a column per run; with `verdicts` (figure -> verdict), the last run's
    cell of each compared figure carries its verdict as a class."""
    verdicts = verdicts or {}
    headers = [
        f"<b>{escape(label)}</b><br><code>{escape(run.path.name)}</code>"
        for label, run in zip(labels, runs, strict=True)
    ]
    head = '<th class="text"></th>' + "".join(f"<th>{h}</th>" for h in headers)
    body = ""
    for label, value in KEY_ROWS:
        verdict = verdicts.get(ROW_FIGURES.get(label, label))
        cells = [f"<td>{value(run)}</td>" for run in runs]
        if verdict:
            cells[-1] = f'<td class="verdict-{verdict}" title="{verdict}">{value(runs[-1])}</td>'
        body += f'<tr><td class="text">{escape(label)}</td>{"".join(cells)}</tr>'
    return (
        '<section id="key-numbers"><h2>Key numbers</h2>'
        '<p class="hint">Rates and latencies cover each run\'s measured phase; totals the whole run.</p>'
        f'<div class="box"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div></section>'
    )


def differences(runs: list[RunData], labels: list[str]) -> str:
    """The workload keys and broker properties whose values are not the same in every run, as the runs
    started (live modifications are in each run's own report)."""
    flat = [
        {
            **_flatten(parse_yaml(run.inputs.get("workload.yaml")) or run.workload),
            **_flatten(parse_yaml(run.inputs.get("broker-config.yaml")), prefix="broker: "),
        }
        for run in runs
    ]
    keys = sorted({key for values in flat for key in values} - {"name"})
    differing = [key for key in keys if len({repr(values.get(key)) for values in flat}) > 1]
    if not differing:
        body = '<p class="hint">The runs have the same workload settings and broker config.</p>'
    else:
        rows = [[escape(key), *(text(values.get(key)) for values in flat)] for key in differing]
        body = f'<div class="scroll">{data_table(["setting", *labels], rows)}</div>'
    hint = '<p class="hint">Workload settings and broker config as each run started.</p>'
    return f'<section id="differences"><h2>What differs</h2>{hint}{body}</section>'


def overlay_charts(runs: list[RunData], labels: list[str], page: Page) -> str:
    ranges = [charts.time_range(run) for run in runs]
    x_range = (min(r[0] for r in ranges), max(r[1] for r in ranges))
    figures = [
        _overlay(runs, labels, "throughput_per_second", None, "received", "Consumed messages per second", x_range),
        _overlay(runs, labels, "latency_per_second", "e2e", "p99", "End-to-end latency p99 per second", x_range),
        _overlay(runs, labels, "throughput_per_second", None, "backlog", "Backlog", x_range),
    ]
    body = "".join(page.figure(fig) for fig in figures if fig is not None)
    hint = '<p class="hint">Time 0 is when each run\'s load started.</p>'
    return f'<section id="charts"><h2>Over the runs</h2>{hint}{body or unavailable("no per-second tables")}</section>'


def _overlay(
    runs: list[RunData],
    labels: list[str],
    table_name: str,
    metric: str | None,
    column: str,
    title: str,
    x_range: tuple[float, float],
) -> go.Figure | None:
    fig = go.Figure()
    for index, (run, label) in enumerate(zip(runs, labels, strict=True)):
        table = run.table(table_name)
        if table is None or column not in table:
            continue
        if metric is not None:
            table = table[table["metric"] == metric]
        table = table.sort_values("second")
        fig.add_trace(charts.run_trace(table["second"], table[column], label, index, unit="ms" if metric else ""))
    if not fig.data:
        return None
    y_title = {"received": "messages / s", "p99": "latency (ms)", "backlog": "records"}[column]
    charts.time_layout(fig, title + (" (log scale)" if metric else ""), y_title, x_range)
    if metric:
        charts.log_axis(fig)
    return fig


def _notes(runs: list[RunData], labels: list[str]) -> list[str]:
    found = []
    for run, label in zip(runs, labels, strict=True):
        found += [f"{label}: {note}" for note in run.summary.get("notes") or []]
        found += [f"{label}: missing {part}" for part in run.missing]
    return found


# ---- the rows of the key table -------------------------------------------------------------------------
def _get(run: RunData, *path: str) -> Any:
    value: Any = run.summary
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _total(run: RunData, key: str) -> Any:
    totals = run.summary.get("totals") or run.run_info.get("totals") or {}
    return totals.get(key)


def _started(run: RunData) -> str:
    return run.started.strftime("%Y-%m-%d %H:%M:%S") if run.started else MISSING


def _latency(metric: str, key: str) -> Row:
    label = {"p99_9": "p99.9"}.get(key, key)
    return f"{metric} {label} (ms)", lambda run: decimal(_get(run, "latency_ms", metric, key))


KEY_ROWS: list[Row] = [
    ("workload", lambda run: escape(run.name)),
    ("status", lambda run: escape(run.status)),
    ("environment", lambda run: text(run.run_info.get("environment"))),
    ("started (UTC)", _started),
    ("Kafka", lambda run: text((run.run_info.get("versions") or {}).get("kafka"))),
    ("librdkafka", lambda run: text((run.run_info.get("versions") or {}).get("librdkafka"))),
    ("CPUs", lambda run: text((run.run_info.get("hardware") or {}).get("cpus"))),
    ("measured seconds", lambda run: integer(_get(run, "throughput", "seconds"))),
    ("produced (msg/s)", lambda run: decimal(_get(run, "throughput", "produced_msgs_per_s"))),
    ("consumed (msg/s)", lambda run: decimal(_get(run, "throughput", "consumed_msgs_per_s"))),
    ("produced (MB/s)", lambda run: decimal(_get(run, "throughput", "produced_mb_per_s"))),
    ("consumed (MB/s)", lambda run: decimal(_get(run, "throughput", "consumed_mb_per_s"))),
    _latency("e2e", "p50"),
    _latency("e2e", "p99"),
    _latency("e2e", "p99_9"),
    _latency("e2e", "max"),
    _latency("publish", "p50"),
    _latency("publish", "p99"),
    ("sent", lambda run: integer(_total(run, "sent"))),
    ("received", lambda run: integer(_total(run, "received"))),
    ("lost", lambda run: integer(_total(run, "lost"))),
    ("unconsumed", lambda run: integer(_total(run, "unconsumed"))),
    ("duplicates", lambda run: integer(_total(run, "duplicates"))),
    ("dead_lettered", lambda run: integer(_total(run, "dead_lettered"))),  # runs with a dead-letter queue
    ("dead_letter_missing", lambda run: integer(_total(run, "dead_letter_missing"))),
    ("dead_letter_duplicates", lambda run: integer(_total(run, "dead_letter_duplicates"))),
    ("accepted", lambda run: integer(_get(run, "share_outcomes", "accepted"))),
    ("released", lambda run: integer(_get(run, "share_outcomes", "released"))),
    ("rejected", lambda run: integer(_get(run, "share_outcomes", "rejected"))),
    ("records per poll", lambda run: decimal(_get(run, "polls", "records_per_poll"))),
    ("records per fetch", lambda run: decimal(_get(run, "client_stats", "records_per_fetch"))),
    ("producer batch (records)", lambda run: decimal(_get(run, "client_stats", "producer_batch_records_avg"))),
    ("producer request (ms)", lambda run: decimal(_get(run, "client_stats", "producer_request_latency_ms_avg"))),
    ("bytes fetched per byte consumed", lambda run: decimal(_get(run, "client_stats", "rx_bytes_per_consumed_byte"))),
    ("live modifications", lambda run: integer(len(run.timeline.get("modifications", [])))),
]


# the key table's rows that show a figure of verdict/figures.py under another name (totals show theirs)
ROW_FIGURES = {
    "produced (msg/s)": "produced.rate",
    "consumed (msg/s)": "consumed.rate",
    "produced (MB/s)": "produced.byteRate",
    "consumed (MB/s)": "consumed.byteRate",
    "e2e p50 (ms)": "e2e.p50",
    "e2e p99 (ms)": "e2e.p99",
    "e2e p99.9 (ms)": "e2e.p99.9",
    "e2e max (ms)": "e2e.max",
    "publish p50 (ms)": "publish.p50",
    "publish p99 (ms)": "publish.p99",
}


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys: {"a": {"b": 1}} -> {"a.b": 1}."""
    if not isinstance(value, dict):
        return {prefix.removesuffix("."): value} if prefix else {}
    flat: dict[str, Any] = {}
    for key, inner in value.items():
        if isinstance(inner, dict) and inner:
            flat.update(_flatten(inner, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = inner
    return flat
