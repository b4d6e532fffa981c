"""The Spark side of a campaign's summary: one row per run (point, repeat) of its measured throughput,
latency percentiles and costs, from the metrics of every run the campaign made."""

import functools
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dimster.pipeline.client_tables import client_ratios, overall_client_ratios, overall_worker_cpu, worker_cpu
from dimster.pipeline.latency import latency_percentiles, measured_latencies
from dimster.pipeline.summary import read_run_info
from dimster.pipeline.throughput import compression_ratio, measured_throughput
from dimster.results.metrics_writer import readable_parts

RUN_KEYS = ["point", "repeat"]
# (histogram metric, percentile) -> column
LATENCIES = {
    ("e2e", "p50"): "e2e_p50_ms",
    ("e2e", "p99"): "e2e_p99_ms",
    ("e2e", "p99_9"): "e2e_p99_9_ms",
    ("publish", "p99"): "publish_p99_ms",
}
COSTS = (
    "compression_ratio",
    "worker_cores",
    "worker_memory_mb",
    "worker_threads",
    "worker_wake_wait_share",
    "worker_producer_cpu_seconds_per_mb",
    "worker_consumer_cpu_seconds_per_mb",
    "records_per_fetch",
    "rx_bytes_per_consumed_byte",
    "producer_queue_time_ms",
    "producer_request_latency_ms",
)
COSTS_NONE = dict.fromkeys(COSTS)


@dataclass(frozen=True)
class Run:
    """A run of the campaign with a bundle to summarize."""

    point: int
    repeat: int
    path: Path
    status: str


def _parts(run: Run, table: str) -> list[str]:
    """The run's readable part files of `table` (each run's own summary notes those left out)."""
    return [str(path) for path in readable_parts(run.path / "metrics" / table)[0]]


def run_metrics(spark, runs: list[Run]) -> pd.DataFrame:
    """One row per run (point, repeat): measured throughput and latency percentiles."""
    from pyspark.sql import functions as F

    def read(table: str):
        parts = [(run, _parts(run, table)) for run in runs]  # each footer read once
        frames = [
            spark.read.parquet(*paths).withColumn("point", F.lit(run.point)).withColumn("repeat", F.lit(run.repeat))
            for run, paths in parts
            if paths
        ]
        if not frames:
            return None
        return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)

    result = pd.DataFrame(columns=RUN_KEYS)
    intervals = read("intervals")
    if intervals is not None:
        intervals = intervals.withColumn("second", F.floor("run_time_s").cast("long"))
        throughput = measured_throughput(intervals, RUN_KEYS).toPandas()
        result = throughput.rename(columns={"seconds": "measured_seconds"})
    histograms = read("histograms")
    if histograms is not None:
        wanted = sorted({metric for metric, _ in LATENCIES})
        measured = measured_latencies(histograms).where(F.col("metric").isin(*wanted))
        latencies = latency_percentiles(measured, RUN_KEYS)
        wide = pd.DataFrame(columns=RUN_KEYS)
        for (metric, percentile), column in LATENCIES.items():
            part = latencies[latencies["metric"] == metric][[*RUN_KEYS, percentile]]
            wide = wide.merge(part.rename(columns={percentile: column}), on=RUN_KEYS, how="outer")
        result = result.merge(wide, on=RUN_KEYS, how="outer")
    if intervals is not None:
        result = result.merge(
            _costs(spark, runs, intervals, read("workers"), read("client_stats")), on=RUN_KEYS, how="left"
        )
    return result


def _costs(spark, runs: list[Run], intervals, workers, stats) -> pd.DataFrame:
    """Per run: the compression ratio the brokers saw, the workers' CPU (cores, and per MB where
    workers host one role only), the consumers' records per fetch request and bytes fetched per byte
    consumed, the producers' queue time and request latency as they saw them."""
    from pyspark.sql import functions as F

    cpu = worker_cpu(workers, intervals, RUN_KEYS).toPandas() if workers is not None else None
    ratios = client_ratios(stats, intervals, RUN_KEYS).toPandas() if stats is not None else None
    rows = []
    for run in runs:
        mine = intervals.where((F.col("point") == run.point) & (F.col("repeat") == run.repeat))
        broker_parts = _parts(run, "brokers")
        brokers = spark.read.parquet(*broker_parts) if broker_parts else None
        topics = list(read_run_info(run.path / "run.json").get("topics") or [])
        row = {"point": run.point, "repeat": run.repeat, **COSTS_NONE}
        row["compression_ratio"] = compression_ratio(mine, brokers, topics)["ratio"]
        if ratios is not None:
            own = ratios[(ratios.point == run.point) & (ratios["repeat"] == run.repeat)]
            if len(own):
                overall = overall_client_ratios(own)
                row["records_per_fetch"] = overall["records_per_fetch"]
                row["rx_bytes_per_consumed_byte"] = overall["rx_bytes_per_consumed_byte"]
                row["producer_queue_time_ms"] = overall["producer_queue_time_ms_avg"]
                row["producer_request_latency_ms"] = overall["producer_request_latency_ms_avg"]
        if cpu is not None:
            own = cpu[(cpu.point == run.point) & (cpu["repeat"] == run.repeat)]
            if len(own):
                row.update({f"worker_{k}": v for k, v in overall_worker_cpu(own).items()})
        rows.append(row)
    return pd.DataFrame(rows, columns=[*RUN_KEYS, *COSTS])
