"""Metrics as Parquet under `metrics/<table>/part-NNNNN.parquet`, written every few seconds, so a
run that dies keeps everything up to its last flush. Row counts follow intervals, clients and
histogram buckets, never the message rate."""

from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dimster.worker.protocol import IntervalReport, WakeLag

INTERVAL_FIELDS = (
    "library",
    "generation",
    "target_rate",
    "sent",
    "sent_bytes",
    "acked",
    "send_errors",
    "received",
    "received_bytes",
    "accepted",
    "released",
    "rejected",
    "renewed",
    "renewals_refused",
    "lock_timeouts",
    "ack_errors",
    "redelivered_after_crash",
    "polls",
    "max_poll_records",
    "max_poll_partitions",
)


# The brokers' samples (coordinator/broker_scrape.py): one row per series per scrape.
BROKER_SCHEMA = pa.schema(
    [
        ("end_time", pa.float64()),
        ("run_time_s", pa.float64()),
        ("phase", pa.string()),
        ("broker", pa.int32()),
        ("metric", pa.string()),
        ("labels", pa.map_(pa.string(), pa.string())),
        ("value", pa.float64()),
    ]
)
# The groups' positions as the brokers see them (kafka/groups.py LagWatch): a row per partition, and a
# row of partition -1 per group with the sum and dimster's own backlog of the group at that moment.
GROUP_LAG_SCHEMA = pa.schema(
    [
        ("end_time", pa.float64()),
        ("run_time_s", pa.float64()),
        ("phase", pa.string()),
        ("group", pa.string()),
        ("partition", pa.int32()),
        ("start_offset", pa.int64()),
        ("lag", pa.int64()),
        ("backlog", pa.int64()),
    ]
)
# A row per worker report: the CPU seconds its process used since its previous report, its resident
# memory and threads at the report, and how late its probe thread woke since the previous report
# (worker/wake_lag.py: its wake-ups, the sum and the largest lateness).
WORKER_SCHEMA = pa.schema(
    [
        ("end_time", pa.float64()),
        ("run_time_s", pa.float64()),
        ("phase", pa.string()),
        ("worker", pa.int32()),
        ("cpu_seconds", pa.float64()),
        ("rss_bytes", pa.int64()),
        ("threads", pa.int32()),
        ("wakes", pa.int32()),
        ("wake_lag_ms_sum", pa.float64()),
        ("wake_lag_ms_max", pa.float64()),
    ]
)
SCHEMAS = {"brokers": BROKER_SCHEMA, "group_lag": GROUP_LAG_SCHEMA, "workers": WORKER_SCHEMA}


class MetricsWriter:
    def __init__(self, folder: Path, load_started: float):
        self.folder = folder
        self.load_started = load_started
        self.rows: dict[str, list[dict]] = defaultdict(list)
        self.parts = 0

    def add(self, report: IntervalReport, phase: str) -> None:
        common = {
            "end_time": report.end_time,
            "run_time_s": round(report.end_time - self.load_started, 3),
            "phase": phase,
            "worker": report.worker_index,
        }
        lag = report.wake_lag or WakeLag()
        self.rows["workers"].append(
            {
                **common,
                "cpu_seconds": report.cpu_seconds,
                "rss_bytes": report.rss_bytes,
                "threads": report.threads,
                "wakes": lag.wakes,
                "wake_lag_ms_sum": lag.lag_ms_sum,
                "wake_lag_ms_max": lag.lag_ms_max,
            }
        )
        for c in report.clients:
            client = {**common, "client_id": c.client_id, "role": c.role, "topic": c.topic, "group": c.group}
            self.rows["intervals"].append({**client, **{f: getattr(c, f) for f in INTERVAL_FIELDS}})
            for (metric, partition), (counts, total, low, high) in c.histograms.items():
                for bucket, count in counts.items():
                    self.rows["histograms"].append(
                        {
                            **client,
                            "metric": metric,
                            "partition": partition,
                            "bucket": bucket,
                            "count": count,
                            "hist_total": total,
                            "hist_min": low,
                            "hist_max": high,
                        }
                    )
            for delivery_count, count in c.delivery_counts.items():
                self.rows["delivery_counts"].append({**client, "delivery_count": delivery_count, "count": count})
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
        for table, rows in self.rows.items():
            if not rows:
                continue
            path = self.folder / table / f"part-{self.parts:05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMAS.get(table)), path)
        self.rows.clear()
        self.parts += 1
