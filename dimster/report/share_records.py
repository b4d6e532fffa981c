"""The brokers' share-group record meters (summary table broker_share_records, per scrape round):
records acknowledged per type beside the records written to dead-letter topics per group, and the
produce requests that wrote them or failed to (KIP-1191); and per group, the dead-letter meters'
counts and measured rates (summary.json's brokers.share.dead_letters)."""

import plotly.graph_objects as go

from dimster.report.charts import add_timeline, run_trace, time_layout
from dimster.report.data import RunData
from dimster.report.page import data_table, decimal, integer, text

METERS = ("records", "produce_requests", "failed_produce_requests")  # pipeline/share_meters.py's names


def share_records_figure(run: RunData, x_range: tuple[float, float]) -> go.Figure | None:
    """Records acknowledged per second by type (broker-wide), and dead-lettered per group of the run."""
    table = run.table("broker_share_records")
    if table is None or table.empty:
        return None
    fig = go.Figure()
    acknowledged = table[table["meter"] == "acknowledged"]
    used = acknowledged.groupby("key")["per_s"].max()
    for key in sorted(used[used > 0].index):
        rows = acknowledged[acknowledged["key"] == key]
        fig.add_trace(run_trace(rows["run_time_s"], rows["per_s"], f"acknowledged {key}", len(fig.data), "records/s"))
    for group, rows in table[table["meter"] == "records"].groupby("key"):
        trace = run_trace(rows["run_time_s"], rows["per_s"], f"dead-lettered {group}", len(fig.data), "records/s")
        trace.line.dash = "dash"
        fig.add_trace(trace)
    if not fig.data:
        return None
    title = "Brokers: records acknowledged per second by type, and dead-lettered per group"
    time_layout(fig, title, "records/s", x_range)
    add_timeline(fig, run, x_range)
    return fig


def dead_letter_requests_figure(run: RunData, x_range: tuple[float, float]) -> go.Figure | None:
    """The produce requests per second that wrote dead letters, and those that failed, per group."""
    table = run.table("broker_share_records")
    if table is None or table.empty:
        return None
    fig = go.Figure()
    for meter, label in (("produce_requests", "produce requests"), ("failed_produce_requests", "failed")):
        for group, rows in table[table["meter"] == meter].groupby("key"):
            trace = run_trace(rows["run_time_s"], rows["per_s"], f"{label} {group}", len(fig.data), "requests/s")
            trace.line.dash = "dot" if meter.startswith("failed") else "solid"
            fig.add_trace(trace)
    if not fig.data:
        return None
    time_layout(fig, "Brokers: produce requests per second writing dead letters, per group", "requests/s", x_range)
    add_timeline(fig, run, x_range)
    return fig


def dead_letter_table(run: RunData) -> str:
    """Per group with a dead-letter queue: what the brokers' meters counted over the run, and per
    second in the measured phase."""
    groups = ((run.summary.get("brokers") or {}).get("share") or {}).get("dead_letters") or {}
    if not groups:
        return ""
    rows = []
    for group, meters in sorted(groups.items()):
        cells = [(integer(meters.get(m)), decimal(meters.get(f"{m}_per_s"))) for m in METERS]
        rows.append([text(group), *(cell for pair in cells for cell in pair)])
    headers = ["group", "records written", "per s", "produce requests", "per s", "failed", "per s"]
    hint = (
        "The brokers' dead-letter meters (DeadLetterQueueRecordCount, ...TotalProduceRequestsPerSec, "
        "...FailedProduceRequestsPerSec): counts over the run, rates over the measured phase."
    )
    return f'<p class="hint">{hint}</p><div class="scroll">{data_table(headers, rows, text_columns=1)}</div>'
