"""The plotly figures of the reports: per-second series over the run time, with the run's phases
shaded and its live modifications and cluster events drawn as labelled vertical lines."""

import json
import math
import re
from dataclasses import dataclass
from html import escape
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from dimster.diagnosis.timeline import diagnoses, stretches
from dimster.report.data import RunData
from dimster.report.saturation import shade_saturated

# The look of every chart: plotly's default rather than each figure's own setting, which costs a deep
# copy of the template per setting (0.1 s of a run's report, 13 of them)
pio.templates.default = "plotly_white"
COLORS = {
    "produced": "#1c7ed6",
    "consumed": "#2f9e44",
    "target": "#868e96",
    "backlog": "#ae3ec9",
    "broker lag": "#495057",
    "e2e p50": "#74c0fc",
    "e2e p99": "#1c7ed6",
    "e2e p99.9": "#0b3d91",
    "publish p99": "#f08c00",
    "limit": "#e03131",
}
# kind -> (line colour, dash)
MARKER_STYLES = {
    "modification": ("#e8590c", "dash"),
    "broker": ("#c92a2a", "dot"),
    "redeploy": ("#7048e8", "dot"),
    "failure": ("#c92a2a", "solid"),
    "fault": ("#c92a2a", "dashdot"),
    "upgrade": ("#0c8599", "dashdot"),
    "tune": ("#099268", "dash"),  # dimster tune's changes
}
RUN_COLORS = ("#1c7ed6", "#e8590c", "#2f9e44", "#ae3ec9", "#c92a2a", "#0ca678", "#f59f00", "#495057")
PLOT_WIDTH_PX = 1150  # the plot area at the page's width, to keep labels from overlapping
LABEL_CHAR_PX = 6.0
MAX_LABEL_ROWS = 4
LABEL_ROW_PX = 17
TIME_PLOT_PX = 300  # the plot area of the charts over time; title, labels and axis come on top
TITLE_PX = 48
BOTTOM_PX = 60


@dataclass(frozen=True)
class Marker:
    """A moment of the run (seconds since load started) drawn as a vertical line."""

    x: float
    label: str
    kind: str  # a key of MARKER_STYLES


@dataclass(frozen=True)
class Phase:
    start: float
    end: float
    label: str


def markers(run: RunData) -> list[Marker]:
    """Every live modification (dimster tune's as its own) and every cluster event or failure of the run."""
    found = []
    for change in run.timeline.get("modifications", []):
        x = run.run_time(change.get("applied", change.get("time")))
        if x is not None:
            label = f"{change.get('key')}={_short(change.get('new'))}"
            tuned = change.get("by") == "tune"
            found.append(Marker(x, f"tune: {label}" if tuned else label, "tune" if tuned else "modification"))
    for event in run.timeline.get("events", []):
        kind = str(event.get("event", ""))
        x = run.run_time(event.get("began", event.get("time")))  # a fault's step may take a while
        if x is None:
            continue
        if kind in ("broker_left", "broker_back"):
            found.append(Marker(x, f"broker {event.get('broker')} {kind.removeprefix('broker_')}", "broker"))
        elif "redeploy" in kind:
            found.append(Marker(x, kind.replace("_", " "), "redeploy"))
        elif kind == "fault":
            found.append(Marker(x, f"node {event.get('node')} {event.get('action')}", "fault"))
        elif kind.startswith("upgrade_"):  # `cluster upgrade`'s steps: their message up to its details
            label = re.split(r" \(|: ", str(event.get("message") or kind.replace("_", " ")))[0]
            found.append(Marker(x, label, "upgrade"))
        elif kind == "worker_killed":
            found.append(Marker(x, f"worker {event.get('worker')} killed", "failure"))
        elif kind == "run_failed":
            found.append(Marker(x, "run failed", "failure"))
    return sorted(found, key=lambda m: m.x)


def phases(run: RunData) -> list[Phase]:
    """Warm-up and drain, from the events."""
    times: dict[str, float] = {}
    for event in run.timeline.get("events", []):
        x = run.run_time(event.get("time"))
        if x is not None:
            times.setdefault(str(event.get("event")), x)
    found = []
    if "measure_started" in times and times["measure_started"] - times.get("load_started", 0.0) >= 0.5:
        found.append(Phase(times.get("load_started", 0.0), times["measure_started"], "warm-up"))
    if "drain_started" in times:
        end = times.get("drain_ended", times.get("run_ended"))
        if end is not None and end > times["drain_started"]:
            found.append(Phase(times["drain_started"], end, "drain"))
    return found


def time_range(run: RunData) -> tuple[float, float]:
    """The run time covered by the per-second tables and the timeline."""
    ends = [m.x for m in markers(run)] + [p.end for p in phases(run)]
    starts = [0.0]
    for name in ("throughput_per_second", "latency_per_second"):
        table = run.table(name)
        if table is not None and "second" in table:
            starts.append(float(table["second"].min()))
            ends.append(float(table["second"].max()) + 1)
    end = max(ends, default=1.0)
    return min(starts), max(end, min(starts) + 1)


def throughput_figure(run: RunData, x_range: tuple[float, float]) -> go.Figure | None:
    table = run.table("throughput_per_second")
    if table is None:
        return None
    fig = go.Figure()
    for column, name in (("sent", "produced"), ("received", "consumed")):
        if column in table:
            fig.add_trace(_line(table["second"], table[column], name, COLORS[name]))
    if "target_rate" in table:
        target = _line(table["second"], table["target_rate"], "target rate", COLORS["target"], dash="dash")
        fig.add_trace(target)
    if predicted := limit_prediction(run, x_range):
        fig.add_trace(predicted)
    time_layout(fig, "Produced and consumed messages per second", "messages / s", x_range)
    add_timeline(fig, run, x_range)
    return fig


def limit_prediction(run: RunData, x_range: tuple[float, float]) -> go.Scatter | None:
    """The rate each binding limit allowed while it held (per group, times the run's groups), up to the
    end of load at the latest (the diagnosis is off in the drain)."""
    events = run.timeline.get("events", [])
    held = stretches(diagnoses(events))
    if not held:
        return None
    stops = (run.run_time(e.get("time")) for e in events if e.get("event") == "stopping")
    load_end = next((x for x in stops if x is not None), x_range[1])
    groups = max(1, len(run.run_info.get("groups") or {}))
    x: list[float | None] = []
    y: list[float | None] = []
    for h in held:
        end = load_end if h.end is None else min(h.end, load_end)
        x += [h.start, end, None]
        y += [h.rate * groups, h.rate * groups, None]
    return _line(x, y, "limit's prediction", COLORS["limit"], dash="longdash")


def backlog_figure(run: RunData, x_range: tuple[float, float]) -> go.Figure | None:
    table = run.table("throughput_per_second")
    if table is None or "backlog" not in table:
        return None
    fig = go.Figure(
        _line(table["second"], table["backlog"], "backlog", COLORS["backlog"], fill="tozeroy"),
    )
    lag = run.table("broker_lag")
    if lag is not None and not lag.empty:  # the brokers' own count, every 5 s (KIP-1226 for share groups)
        summed = lag.groupby("run_time_s", as_index=False)["lag"].sum()
        fig.add_trace(_line(summed["run_time_s"], summed["lag"], "brokers' lag", COLORS["broker lag"]))
    title = "Backlog: acknowledged records not yet consumed (dimster) and the groups' lag (brokers)"
    time_layout(fig, title, "records", x_range, legend=lag is not None and not lag.empty)
    add_timeline(fig, run, x_range)
    return fig


def latency_figure(run: RunData, x_range: tuple[float, float]) -> go.Figure | None:
    table = run.table("latency_per_second")
    if table is None:
        return None
    fig = go.Figure()
    series = (
        ("e2e", "p50", "e2e p50"),
        ("e2e", "p99", "e2e p99"),
        ("e2e", "p99_9", "e2e p99.9"),
        ("publish", "p99", "publish p99"),
    )
    for metric, column, name in series:
        rows = table[table["metric"] == metric].sort_values("second")
        if not rows.empty and column in rows:
            fig.add_trace(_line(rows["second"], rows[column], name, COLORS[name], unit="ms"))
    if not fig.data:
        return None
    time_layout(fig, "Latency per second (log scale)", "latency (ms)", x_range)
    log_axis(fig)
    shade_saturated(fig, run, x_range)  # where the latencies measure dimster's own wait too
    add_timeline(fig, run, x_range)
    return fig


def in_flight_figure(run: RunData, x_range: tuple[float, float]) -> go.Figure | None:
    """The brokers' in-flight records per share-partition against the lock budget (KIP-932)."""
    table = run.table("share_partition_in_flight")
    if table is None or table.empty:
        return None
    fig = go.Figure()
    series = table.groupby(["group", "topic", "partition"], sort=True)
    for index, ((group, topic, partition), rows) in enumerate(series):
        name = f"{topic}-{partition}" if table["group"].nunique() == 1 else f"{group} {topic}-{partition}"
        fig.add_trace(run_trace(rows["run_time_s"], rows["in_flight_messages"], name, index, unit="records"))
    budget = run.lock_budget
    fig.add_trace(_line(list(x_range), [budget, budget], f"lock budget ({budget:,})", COLORS["target"], dash="dash"))
    time_layout(fig, "Brokers: in-flight records per share-partition", "records", x_range, legend=len(series) <= 12)
    add_timeline(fig, run, x_range)
    return fig


def purgatory_figure(run: RunData, x_range: tuple[float, float]) -> go.Figure | None:
    """The brokers' purgatory sizes over time, per delayed operation that held anything."""
    table = run.table("broker_purgatory")
    if table is None or table.empty:
        return None
    used = table.groupby("operation")["size"].max()
    fig = go.Figure()
    for index, operation in enumerate(sorted(used[used > 0].index)):
        rows = table[table["operation"] == operation].groupby("run_time_s", as_index=False)["size"].sum()
        fig.add_trace(run_trace(rows["run_time_s"], rows["size"], operation, index, unit="operations"))
    if not fig.data:
        return None
    time_layout(fig, "Brokers: purgatory size per delayed operation", "operations waiting", x_range)
    add_timeline(fig, run, x_range)
    return fig


def delivery_figure(run: RunData) -> go.Figure | None:
    table = run.table("delivery_counts")
    if table is None:
        return None
    table = table.sort_values("delivery_count")
    records = table["records"].astype(float)
    fig = go.Figure(
        go.Bar(
            x=table["delivery_count"].astype(int).astype(str),
            y=records,
            text=[f"{int(v):,}" for v in records],
            textposition="outside",
            marker_color=COLORS["produced"],
            width=0.5 if len(table) <= 3 else None,
            hovertemplate="delivered %{x} time(s): %{y:,} records<extra></extra>",
        )
    )
    _frame(fig, "Records by delivery count", plot_height=240, legend=False)
    fig.update_xaxes(title_text="delivery count (times a record was delivered)", type="category")
    fig.update_yaxes(title_text="records")
    if records.max() > 1000 * max(records.min(), 1):
        fig.update_yaxes(type="log", title_text="records (log scale)")
    else:
        fig.update_yaxes(range=[0, records.max() * 1.15])
    return fig


def run_trace(x: Any, y: Any, name: str, index: int, unit: str = "") -> go.Scatter:
    """One run's series in a comparison chart."""
    return _line(x, y, name, RUN_COLORS[index % len(RUN_COLORS)], unit=unit)


def time_layout(fig: go.Figure, title: str, y_title: str, x_range: tuple[float, float], legend: bool = True) -> None:
    _frame(fig, title, plot_height=TIME_PLOT_PX, legend=legend)
    fig.update_xaxes(title_text="run time (s since load started)", range=list(x_range))
    fig.update_yaxes(title_text=y_title, rangemode="tozero")
    fig.update_layout(hovermode="x unified")


def log_axis(fig: go.Figure) -> None:
    """A log y axis labelled 0.1, 1, 10, 1,000 ...: only powers of ten when the data spans decades."""
    values = [v for trace in fig.data for v in trace.y if v == v and v is not None and v > 0]
    fig.update_yaxes(type="log", rangemode="normal", tickformat=",~g")
    if values and math.log10(max(values) / min(values)) >= 1.5:  # whole decades, so both ends have a label
        low, high = math.floor(math.log10(min(values)) - 0.02), math.ceil(math.log10(max(values)) + 0.02)
        fig.update_yaxes(dtick=1, range=[low, high])


def add_timeline(fig: go.Figure, run: RunData, x_range: tuple[float, float]) -> None:
    """Shade the phases, and draw the markers of `run` as lines rising above the plot to their labels,
    which are staggered in rows so that they do not overlap each other or the data."""
    for phase in phases(run):
        fig.add_vrect(  # clamped: a label outside the axis range is not drawn
            x0=max(phase.start, x_range[0]),
            x1=min(phase.end, x_range[1]),
            fillcolor="#adb5bd",
            opacity=0.15,
            line_width=0,
            layer="below",
            annotation_text=phase.label,
            annotation_position="bottom left",
            annotation_font={"size": 11, "color": "#616e7c"},
        )
    span = max(x_range[1] - x_range[0], 1e-9)
    row_ends: list[float] = []  # per label row: where its rightmost label ends, in run time
    for marker in markers(run):
        color, dash = MARKER_STYLES[marker.kind]
        width = len(marker.label) * LABEL_CHAR_PX / PLOT_WIDTH_PX * span
        to_left = marker.x + width > x_range[1]
        start = marker.x - width if to_left else marker.x
        row = next((i for i, end in enumerate(row_ends) if start > end), None)
        if row is None and len(row_ends) < MAX_LABEL_ROWS:
            row = len(row_ends)
            row_ends.append(start)
        elif row is None:  # every row is taken here: the one that frees up first
            row = row_ends.index(min(row_ends))
        row_ends[row] = start + width + 0.01 * span
        fig.add_shape(
            type="line",
            x0=marker.x,
            x1=marker.x,
            y0=0,
            y1=1 + ((row + 1) * LABEL_ROW_PX - 4) / TIME_PLOT_PX,
            yref="paper",
            line={"color": color, "width": 1.5, "dash": dash},
        )
        fig.add_annotation(
            x=marker.x,
            y=1,
            yref="paper",
            yshift=row * LABEL_ROW_PX,
            text=escape(marker.label),
            showarrow=False,
            xanchor="right" if to_left else "left",
            xshift=-3 if to_left else 3,
            yanchor="bottom",
            font={"size": 11, "color": color},
            bgcolor="white",  # hides the lines of later markers rising behind the label
        )
    _frame(fig, None, plot_height=TIME_PLOT_PX, legend=fig.layout.showlegend, label_rows=len(row_ends))


def _frame(fig: go.Figure, title: str | None, plot_height: int, legend: bool, label_rows: int = 0) -> None:
    """Style and size: a title row, then `label_rows` rows of marker labels, then the plot area of
    `plot_height` pixels; the legend sits at the right of the title row."""
    top = TITLE_PX + label_rows * LABEL_ROW_PX
    fig.update_layout(
        height=plot_height + top + BOTTOM_PX,
        margin={"l": 80, "r": 30, "t": top, "b": BOTTOM_PX},
        showlegend=legend,
        legend={
            "orientation": "h",
            "yanchor": "bottom",
            "y": 1 + (label_rows * LABEL_ROW_PX + 8) / plot_height,
            "xanchor": "right",
            "x": 1,
        },
        font={"family": '-apple-system, "Segoe UI", Roboto, Arial, sans-serif', "size": 12},
    )
    if title is not None:
        fig.update_layout(
            title={
                "text": escape(title),
                "x": 0.01,
                "xanchor": "left",
                "y": 1,
                "yref": "container",
                "yanchor": "top",
                "pad": {"t": 14},
                "font": {"size": 16},
            }
        )
    fig.update_yaxes(separatethousands=True, gridcolor="#eef1f4")
    fig.update_xaxes(gridcolor="#eef1f4", zeroline=False)


def _line(
    x: Any, y: Any, name: str, color: str, *, dash: str = "solid", fill: str | None = None, unit: str = ""
) -> go.Scatter:
    """A series; hover shows whole numbers, or 4 significant digits and the unit for latencies."""
    value = "%{y:,.4~r} ms" if unit == "ms" else f"%{{y:,.0f}} {unit}".rstrip()
    return go.Scatter(
        x=pd.Series(x).to_numpy(),
        y=pd.Series(y).astype(float).to_numpy(),
        name=name,
        mode="lines",
        line={"color": color, "width": 2, "dash": dash},
        fill=fill,
        hovertemplate=f"{value}<extra>{escape(name)}</extra>",
    )


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
