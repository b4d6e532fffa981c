"""`campaign.html` of a campaign: what it varied, each key number charted against each dimension (one
series per combination of the other dimensions, error bars from the repeats' spread), a table of its
points with links to their runs' reports, and the notes. One self-contained file that works offline,
written from `campaign/summary/` and campaign.json, or from campaign.json alone before a summary."""

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd
import plotly.graph_objects as go

from dimster.campaign.model import read_campaign_json, short_key
from dimster.pipeline.campaign_summary import dimension_keys, point_label
from dimster.pipeline.summary import read_run_info
from dimster.report.charts import RUN_COLORS, _frame
from dimster.report.page import MISSING, Page, data_table, decimal, integer, notes_box, text, unavailable
from dimster.report.verdict_panel import campaign_verdict_section

# points.parquet metric -> label; charted and tabled in this order, when the summary has them
KEY_METRICS = {
    "consumed_msgs_per_s": "consumed msg/s",
    "produced_msgs_per_s": "produced msg/s",
    "e2e_p50_ms": "e2e p50 (ms)",
    "e2e_p99_ms": "e2e p99 (ms)",
    "publish_p99_ms": "publish p99 (ms)",
}
MODE_METRICS = {  # a run plan's own result, from run.json's `mode`
    "mode_limit_msgs_per_s": "sustained limit (msg/s)",
    "mode_drain_msgs_per_s": "drain rate (msg/s)",
    "mode_drain_seconds": "drain time (s)",
    "mode_mean_rate_msgs_per_s": "max-rate: mean rate (msg/s)",
}
MODE_COLUMNS = {**MODE_METRICS, "mode_passed": "passed (share of repeats)"}  # tabled, not charted
DEAD_LETTER_METRICS = {"dead_lettered": "dead_lettered (records)"}  # runs with a dead-letter queue only
DEAD_LETTER_FAULTS = {  # tabled where the runs had a dead-letter queue, charted where some point has any
    "dead_letter_missing": "dead_letter_missing (records)",
    "dead_letter_duplicates": "dead_letter_duplicates (records)",
}
COST_METRICS = {  # charted where they vary between points by more than COST_SPREAD (compression, CPU)
    "compression_ratio": "payload bytes per byte the brokers took in",
    "worker_memory_mb": "workers' memory (MB)",
    "worker_threads": "workers' threads",
    "worker_wake_wait_share": "share of time a worker's threads waited to run",
    "worker_producer_cpu_seconds_per_mb": "producer CPU s per MB",
    "worker_consumer_cpu_seconds_per_mb": "consumer CPU s per MB",
    "records_per_fetch": "consumer records per fetch request",
    "rx_bytes_per_consumed_byte": "bytes fetched per byte consumed",
    "producer_queue_time_ms": "producer queue time (ms, the client's average)",
    "producer_request_latency_ms": "producer request latency (ms, the client's average)",
}
COST_SPREAD = 1.1
CHART_PLOT_PX = 260


@dataclass(frozen=True)
class Dimension:
    keys: list[str]
    ticks: list[str]  # its values as the x axis shows them, in the campaign file's order

    @property
    def label(self) -> str:
        return " / ".join(short_key(key) for key in self.keys)

    def tick(self, values: dict[str, Any]) -> str:
        return " / ".join(shown(values.get(key)) for key in self.keys)


def write_campaign_page(campaign_dir: Path) -> Path:
    """Write `campaign_dir/campaign.html`; returns its path."""
    campaign = read_campaign_json(campaign_dir)
    summary_dir = campaign_dir / "campaign" / "summary"
    points = _read_points(summary_dir / "points.parquet")
    notes = _summary_notes(summary_dir) if points is not None else []
    if points is None:
        notes.append("the campaign summary is missing (campaign/summary/points.parquet): no numbers or charts")
    dimensions = campaign_dimensions(campaign)
    page = Page(f"dimster campaign: {campaign.get('name', campaign_dir.name)}")
    verdict = read_run_info(summary_dir / "summary.json").get("verdict")
    page.add(
        header(campaign, campaign_dir),
        campaign_verdict_section(verdict),
        charts_section(page, campaign, dimensions, points),
        point_table(campaign_dir, campaign, dimensions, points),
        notes_box("Notes", notes),
    )
    target = campaign_dir / "campaign.html"
    target.write_text(page.render(), encoding="utf-8")
    return target


def campaign_dimensions(campaign: dict[str, Any]) -> list[Dimension]:
    """The campaign's dimensions; without a list of them, one per key in the order points set them."""
    points = campaign.get("points") or []
    listed = [d for d in campaign.get("dimensions") or [] if d.get("keys")]
    if not listed:
        listed = [{"keys": [key], "values": None} for key in dimension_keys(campaign)]
    found = []
    for entry in listed:
        keys = [str(key) for key in entry["keys"]]
        dimension = Dimension(keys, [])
        for value in entry.get("values") or []:  # one value per key
            values = value if isinstance(value, list) and len(value) == len(keys) else [value]
            dimension.ticks.append(" / ".join(shown(v) for v in values))
        for point in points:  # values the points have but the list lacks, after it
            tick = dimension.tick(point.get("values") or {})
            if tick not in dimension.ticks:
                dimension.ticks.append(tick)
        found.append(dimension)
    return found


def shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _read_points(path: Path) -> pd.DataFrame | None:
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError):
        return None


def _summary_notes(summary_dir: Path) -> list[str]:
    summary = read_run_info(summary_dir / "summary.json")
    if not summary:
        return ["campaign/summary/summary.json is missing or unreadable: its notes are not shown"]
    return [str(note) for note in summary.get("notes") or []]


# ---- header ------------------------------------------------------------------------------------------
def header(campaign: dict[str, Any], campaign_dir: Path) -> str:
    points = campaign.get("points") or []
    indexes = {p.get("index") for p in points}
    statuses: dict[str, int] = {}
    for point in points:
        statuses[str(point.get("status"))] = statuses.get(str(point.get("status")), 0) + 1
    mode = campaign.get("mode") or {}
    mode_text = mode.get("type") if isinstance(mode, dict) else mode
    fields = [
        ("campaign file", text(campaign.get("campaign_file"))),
        ("environment", text(campaign.get("environment"))),
        ("mode", text(mode_text)),
        ("points", f"{len(indexes)}, each run {text(campaign.get('repeat') or 1)} time(s)"),
        ("runs", escape(", ".join(f"{n} {status}" for status, n in statuses.items())) or MISSING),
        ("started", _time(campaign.get("created"))),
        ("ended", _time(campaign.get("ended"))),
        ("dimensions", escape("; ".join(d.label for d in campaign_dimensions(campaign))) or MISSING),
    ]
    meta = "".join(f"<div><span>{escape(label)}</span>{value}</div>" for label, value in fields)
    name = str(campaign.get("name") or campaign_dir.name)
    return f'<header><h1>{escape(name)}</h1><div class="run-id">campaign</div><div class="meta">{meta}</div></header>'


def _time(epoch: Any) -> str:
    try:
        return escape(datetime.fromtimestamp(float(epoch), UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))
    except (TypeError, ValueError, OverflowError, OSError):
        return MISSING


# ---- charts ------------------------------------------------------------------------------------------
def charted_metrics(points: pd.DataFrame) -> dict[str, str]:
    """The key metrics, run-plan metrics and dead-letter totals the summary has a mean of for some point."""
    wanted = {**KEY_METRICS, **MODE_METRICS, **DEAD_LETTER_METRICS}
    charted = {m: label for m, label in wanted.items() if f"{m}_mean" in points and points[f"{m}_mean"].notna().any()}
    faults = DEAD_LETTER_FAULTS.items()
    charted |= {m: label for m, label in faults if f"{m}_mean" in points and (points[f"{m}_mean"] > 0).any()}
    return {**charted, **{m: label for m, label in COST_METRICS.items() if _varies(points, m)}}


def _varies(points: pd.DataFrame, metric: str) -> bool:
    means = points[f"{metric}_mean"].dropna() if f"{metric}_mean" in points else pd.Series(dtype=float)
    return len(means) > 1 and means.min() > 0 and means.max() / means.min() > COST_SPREAD


def charts_section(page: Page, campaign: dict, dimensions: list[Dimension], points: pd.DataFrame | None) -> str:
    parts = ['<section id="charts"><h2>Key numbers by dimension</h2>']
    if points is None or not dimensions:
        parts.append(unavailable("no campaign summary" if points is None else "the campaign has no dimensions"))
        return "".join(parts) + "</section>"
    metrics = charted_metrics(points)
    if not metrics:
        parts.append(unavailable("no run of the campaign has numbers"))
        return "".join(parts) + "</section>"
    parts.append(
        '<p class="hint">Means over each point\'s repeats (measured phase); error bars from the lowest to the '
        "highest repeat. One line per combination of the other dimensions.</p>"
    )
    values = _point_values(campaign)
    for number, dimension in enumerate(dimensions):
        keys = " / ".join(dimension.keys)
        parts.append(f'<h3 class="spaced" id="dimension-{number + 1}">{escape(keys)}</h3>')
        others = [d for d in dimensions if d is not dimension]
        for metric, label in metrics.items():
            parts.append(page.figure(dimension_figure(dimension, others, points, values, metric, label)))
    return "".join(parts) + "</section>"


def _point_values(campaign: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(p["index"]): p.get("values") or {} for p in campaign.get("points") or [] if p.get("index") is not None}


def dimension_figure(
    dimension: Dimension,
    others: list[Dimension],
    points: pd.DataFrame,
    values: dict[int, dict[str, Any]],
    metric: str,
    label: str,
) -> go.Figure:
    """`metric` against `dimension`'s values, a series per combination of the `others`' values."""
    series: dict[str, list[dict]] = {}
    for row in points.to_dict("records"):
        point_values = values.get(int(row["point"]), {})
        name = ", ".join(f"{d.label}={d.tick(point_values)}" for d in others) or "mean"
        series.setdefault(name, []).append({**row, "x": dimension.tick(point_values)})
    fig = go.Figure()
    for number, (name, rows) in enumerate(series.items()):
        rows.sort(key=lambda r: dimension.ticks.index(r["x"]) if r["x"] in dimension.ticks else len(dimension.ticks))
        mean = [_float(r.get(f"{metric}_mean")) for r in rows]
        low = [_float(r.get(f"{metric}_min")) for r in rows]
        high = [_float(r.get(f"{metric}_max")) for r in rows]
        spread = any((r.get("repeats") or 0) > 1 for r in rows)
        error = (
            {
                "type": "data",
                "symmetric": False,
                "array": [_gap(h, m) for h, m in zip(high, mean, strict=True)],
                "arrayminus": [_gap(m, lo) for m, lo in zip(mean, low, strict=True)],
                "thickness": 1.5,
                "width": 5,
            }
            if spread
            else None
        )
        color = RUN_COLORS[number % len(RUN_COLORS)]
        fig.add_trace(
            go.Scatter(
                x=[r["x"] for r in rows],
                y=mean,
                name=name,
                mode="lines+markers",
                line={"color": color, "width": 2},
                marker={"size": 7},
                error_y=error,
                customdata=[[int(r["point"]), int(r.get("repeats") or 0)] for r in rows],
                hovertemplate=(
                    f"point %{{customdata[0]}}: %{{y:,.4~r}} ({escape(label)}, "
                    f"%{{customdata[1]}} repeat(s))<extra>{escape(name)}</extra>"
                ),
            )
        )
    _frame(fig, f"{label} by {dimension.label}", plot_height=CHART_PLOT_PX, legend=len(series) > 1)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=dimension.ticks, title_text=dimension.label)
    fig.update_yaxes(title_text=label, rangemode="tozero")
    return fig


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _gap(upper: float | None, lower: float | None) -> float | None:
    return None if upper is None or lower is None else max(upper - lower, 0.0)


# ---- the point table ---------------------------------------------------------------------------------
def point_table(campaign_dir: Path, campaign: dict, dimensions: list[Dimension], points: pd.DataFrame | None) -> str:
    """A row per point: its number, dimension values, its runs' status, key numbers, links to reports."""
    runs: dict[int, list[dict]] = {}
    for point in campaign.get("points") or []:
        if point.get("index") is not None:
            runs.setdefault(int(point["index"]), []).append(point)
    rows_by_point = {} if points is None else {int(r["point"]): r for r in points.to_dict("records")}
    tabled = {**KEY_METRICS, "produced_mb_per_s": "produced MB/s", **MODE_COLUMNS, **DEAD_LETTER_METRICS}
    shown_metrics = {
        m: label
        for m, label in {**tabled, **DEAD_LETTER_FAULTS, **COST_METRICS}.items()
        if points is not None and f"{m}_mean" in points and points[f"{m}_mean"].notna().any()
    }
    limits = {index: _limits(campaign_dir, runs[index]) for index in runs}
    limit_column = ["binding limit"] if any(limits.values()) else []
    headers = ["point", *(d.label for d in dimensions), "status", "repeats", *shown_metrics.values(), *limit_column]
    headers.append("runs")
    rows = []
    for index in sorted(runs):
        repeats = sorted(runs[index], key=lambda p: p.get("repeat") or 0)
        values = repeats[0].get("values") or {}
        summary = rows_by_point.get(index, {})
        statuses = ", ".join(dict.fromkeys(str(p.get("status")) for p in repeats))
        rows.append(
            [
                f'<span title="{escape(point_label(repeats[0]))}">{index}</span>',
                *(escape(d.tick(values)) for d in dimensions),
                escape(statuses),
                integer(summary.get("repeats")) if summary else MISSING,
                *(_value(metric, summary.get(f"{metric}_mean")) for metric in shown_metrics),
                *([escape(limits[index])] if limit_column else []),
                _links(campaign_dir, repeats),
            ]
        )
    if not rows:
        return f'<section id="points"><h2>Points</h2>{unavailable("campaign.json lists no points")}</section>'
    table = data_table(headers, rows, text_columns=len(dimensions) + 2)
    hint = (
        '<p class="hint">Numbers are means over the repeats that completed. Runs link to their own report '
        "where it exists.</p>"
    )
    return f'<section id="points"><h2>Points</h2>{hint}<div class="scroll">{table}</div></section>'


def _limits(campaign_dir: Path, repeats: list[dict]) -> str:
    """What limited the point's share groups as each repeat's run ended (run.json's `limit`): the
    limit and the rate it allowed, once per distinct one."""
    found = []
    for point in repeats:
        limit = (
            read_run_info(campaign_dir / str(point.get("bundle")) / "run.json").get("limit")
            if point.get("bundle")
            else None
        )
        if isinstance(limit, dict) and limit.get("limit"):
            allows = f" {limit['limitRate']:,.0f} msg/s" if limit.get("limitRate") is not None else ""
            found.append(f"{limit['limit']}{allows}")
    return ", ".join(dict.fromkeys(found))


def _value(metric: str, value: Any) -> str:
    if metric.endswith("msgs_per_s"):
        return integer(value)
    return decimal(value)


def _links(campaign_dir: Path, repeats: list[dict]) -> str:
    links = []
    for point in repeats:
        bundle = point.get("bundle")
        name = f"#{point.get('repeat') or 1}"
        if bundle and (campaign_dir / bundle / "report.html").is_file():
            href = quote(f"{bundle}/report.html")
            links.append(f'<a href="{escape(href)}" title="{escape(str(bundle))}">{escape(name)}</a>')
        else:
            links.append(f'<span title="{escape(str(bundle or "no bundle"))}">{escape(name)}</span>')
    return " ".join(links)
