"""The report's tables per partition and per client: latency percentiles of the measured phase, and
for each client the columns of the rows of metrics/schema.py that name its client table."""

from typing import Any

import pandas as pd

from dimster.metrics.schema import Metric, in_client_table
from dimster.report.data import RunData, natural_key
from dimster.report.key_numbers import PERCENTILES
from dimster.report.page import data_table, decimal, integer, text, unavailable


def partition_table(run: RunData) -> str:
    table = run.table("latency_per_partition")
    if table is None:
        return f'<section id="partitions"><h2>Partitions</h2>{unavailable("no per-partition latencies")}</section>'
    table = table.sort_values(["topic", "partition"], key=lambda s: s.map(natural_key))
    columns = ("p50", "p90", "p99", "p99_9", "max")
    rows = [
        [text(r["topic"]), integer(r["partition"]), integer(r["count"]), *(decimal(r.get(c)) for c in columns)]
        for r in table.to_dict("records")
    ]
    headers = ["topic", "partition", "records", "e2e p50 ms", "p90", "p99", "p99.9", "max"]
    return (
        '<section id="partitions"><h2>Partitions</h2>'
        '<p class="hint">End-to-end latency per partition, measured phase.</p>'
        f'<div class="scroll">{data_table(headers, rows)}</div></section>'
    )


def client_tables(run: RunData) -> str:
    latency = run.table("latency_per_client")
    stats = run.table("client_stats")
    if latency is None and stats is None:
        return f'<section id="clients"><h2>Clients</h2>{unavailable("no per-client tables")}</section>'
    clients = _per_client(latency, stats)
    producers = clients[clients["role"] == "producer"]
    consumers = clients[clients["role"] != "producer"]
    parts = ['<section id="clients"><h2>Clients</h2>']
    if not producers.empty:
        shown = in_client_table("producers")
        headers = ["producer", "library", "records", "publish p50 ms", "p99", "p99.9", "max", *(m.label for m in shown)]
        rows = [
            [
                text(r["client_id"]),
                text(r.get("library")),
                integer(r.get("publish count")),
                *_percentiles(r, "publish"),
                *(_cell(m, r.get(m.name)) for m in shown),
            ]
            for r in producers.to_dict("records")
        ]
        table = data_table(headers, rows, text_columns=2)
        parts.append(f'<h3>Producers</h3><div class="scroll">{table}</div>')
    if not consumers.empty:
        shown = in_client_table("consumers")
        headers = ["consumer", "role", "library", "records", "e2e p50 ms", "p99", "p99.9", "max"]
        headers += [m.label for m in shown]
        rows = [
            [
                text(r["client_id"]),
                text(r["role"]),
                text(r.get("library")),
                integer(r.get("records_consumed", r.get("e2e count"))),
                *_percentiles(r, "e2e"),
                *(_cell(m, r.get(m.name)) for m in shown),
            ]
            for r in consumers.to_dict("records")
        ]
        table = data_table(headers, rows, text_columns=3)
        parts.append(f'<h3 class="spaced">Consumers</h3><div class="scroll">{table}</div>')
    parts.append("</section>")
    return "".join(parts)


def _cell(metric: Metric, value: Any) -> str:
    """A client's figure of `metric`: counts and byte sizes whole, the rest with decimals."""
    return integer(value) if metric.kind == "counter" or metric.unit == "bytes" else decimal(value)


def _per_client(latency: pd.DataFrame | None, stats: pd.DataFrame | None) -> pd.DataFrame:
    """One row per client: `<metric> <percentile>` latency columns joined with the client statistics."""
    frames = []
    if latency is not None:
        wide = latency.pivot_table(
            index=["client_id", "role"],
            columns="metric",
            values=["count", *(k for k, _ in PERCENTILES)],
            aggfunc="first",
        )
        wide.columns = [f"{metric} {value}" for value, metric in wide.columns]
        frames.append(wide)
    if stats is not None:
        frames.append(stats.set_index(["client_id", "role"]))
    joined = frames[0] if len(frames) == 1 else frames[0].join(frames[1], how="outer")
    joined = joined.reset_index()
    return joined.sort_values("client_id", key=lambda s: s.map(natural_key))


def _percentiles(row: dict[str, Any], metric: str) -> list[str]:
    return [decimal(row.get(f"{metric} {key}")) for key in ("p50", "p99", "p99_9", "max")]
