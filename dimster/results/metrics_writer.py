"""Metrics as Parquet under `metrics/<table>/part-NNNNN.parquet`, written every few seconds, so a
run that dies keeps everything up to its last flush (metrics_parts.py: which files hold a table). Row
counts follow intervals, clients and histogram buckets, never the message rate."""

import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from dimster.metrics.schema import (
    CLIENT_COLUMNS,
    DELIVERY_COUNT_COLUMNS,
    FIXED_SCHEMAS,
    HISTOGRAM_COLUMNS,
    INTERVAL_COLUMNS,
    REPORT_COLUMNS,
)
from dimster.results.metrics_parts import MergeBehind

ARROW_TYPES = {
    "float64": pa.float64(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "string": pa.string(),
    "map<string, string>": pa.map_(pa.string(), pa.string()),
}
SCHEMAS = {
    table: pa.schema([(column, ARROW_TYPES[kind]) for column, kind in columns])
    for table, columns in FIXED_SCHEMAS.items()
}
# a worker's row: the report's columns, then its usage and its wake probe's lateness
WORKER_VALUES = tuple(column for column, _ in FIXED_SCHEMAS["workers"] if column not in REPORT_COLUMNS)


class Report(Protocol):
    """What the writer reads of a worker's interval report (worker/protocol.py's IntervalReport): its
    clients are ClientIntervals, with a field per column of INTERVAL_COLUMNS."""

    worker_index: int
    end_time: float
    clients: list[Any]
    cpu_seconds: float
    rss_bytes: int
    threads: int
    wake_lag: Any  # a WakeLag (wakes, lag_ms_sum, lag_ms_max), or None
    steal_seconds: float
    cores: int


class MetricsWriter:
    def __init__(self, folder: Path, load_started: float, merge_behind: bool = False):
        """`merge_behind`: merge the parts while the run goes on (a run's own writer; close() at its end)."""
        self.folder = folder
        self.load_started = load_started
        self.rows: dict[str, list[dict]] = defaultdict(list)
        self.parts = 0
        self.merges = MergeBehind(folder) if merge_behind else None

    def add(self, report: Report, phase: str) -> None:
        times = (report.end_time, round(report.end_time - self.load_started, 3), phase, report.worker_index)
        common = _row({}, REPORT_COLUMNS, times)
        lag = report.wake_lag
        wake_lag = (lag.wakes, lag.lag_ms_sum, lag.lag_ms_max) if lag else (0, 0.0, 0.0)
        usage = (report.cpu_seconds, report.rss_bytes, report.threads, *wake_lag, report.steal_seconds, report.cores)
        self.rows["workers"].append(_row(common, WORKER_VALUES, usage))
        for c in report.clients:
            client = _row(common, CLIENT_COLUMNS, (c.client_id, c.role, c.topic, c.group))
            self.rows["intervals"].append({**client, **{f: getattr(c, f) for f in INTERVAL_COLUMNS}})
            for (metric, partition), (counts, total, low, high) in c.histograms.items():
                for bucket, count in counts.items():
                    values = (metric, partition, bucket, count, total, low, high)
                    self.rows["histograms"].append(_row(client, HISTOGRAM_COLUMNS, values))
            for delivery_count, count in c.delivery_counts.items():
                self.rows["delivery_counts"].append(_row(client, DELIVERY_COUNT_COLUMNS, (delivery_count, count)))
            if c.client_stats:
                self.rows["client_stats"].append({**client, **c.client_stats})

    def add_broker_samples(self, at: float, broker: int, samples, phase: str) -> None:
        common = {"end_time": at, "run_time_s": round(at - self.load_started, 3), "phase": phase, "broker": broker}
        self.rows["brokers"].extend(
            {**common, "metric": name, "labels": sorted(labels.items()), "value": value}
            for name, labels, value in samples
        )

    def add_group_lag(self, sample, backlogs: dict[str, int], phase: str) -> None:
        """A LagSample, with dimster's backlog per group (acknowledged, not yet settled) beside it."""
        common = {"end_time": sample.at, "run_time_s": round(sample.at - self.load_started, 3), "phase": phase}
        for group, partitions in sample.groups.items():
            rows = [
                {**common, "group": group, "partition": p, "start_offset": start, "lag": lag, "backlog": None}
                for p, (start, lag) in sorted(partitions.items())
            ]
            total = {"partition": -1, "start_offset": None, "lag": sample.lag(group), "backlog": backlogs.get(group)}
            self.rows["group_lag"].extend([*rows, {**common, "group": group, **total}])

    def flush(self) -> None:
        # workers last: a crashed run's recovery takes a flush as written once its workers part is (write_tail)
        for table, rows in sorted(self.rows.items(), key=lambda item: item[0] == "workers"):
            if not rows:
                continue
            path = self.folder / table / f"part-{self.parts:05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            # whole or not at all: a reader never sees a part half written (Spark skips names with a dot)
            writing = path.with_name(f".{path.name}.writing")
            pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMAS.get(table)), writing)
            os.replace(writing, path)
        self.rows.clear()
        self.parts += 1
        if self.merges:
            self.merges.flushed(self.parts)

    def close(self) -> None:
        """After the last flush: wait for the merges behind, if any."""
        if self.merges:
            self.merges.close()


def _row(first: dict, columns: tuple[str, ...], values: tuple) -> dict:
    """`first`'s columns, then `columns` with their `values`."""
    return {**first, **dict(zip(columns, values, strict=True))}
