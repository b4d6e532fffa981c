"""The Spark side of a campaign's summary: one row per run (point, repeat) of its measured throughput,
latency percentiles and costs, from the metrics of every run the campaign made."""

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from dimster.errors import DimsterError
from dimster.pipeline.client_tables import client_ratios, overall_client_ratios, overall_worker_cpu, worker_cpu
from dimster.pipeline.latency import latency_percentiles, measured_latencies
from dimster.pipeline.summary import read_run_info
from dimster.pipeline.throughput import compression_ratios, measured_throughput
from dimster.results.metrics_parts import readable_parts

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


def read_runs(spark, runs: list[Run], table: str):
    """Every run's readable part files of `table` in one read, each row with its run's point and
    repeat; None when no run has any. The schema is the union of the parts' own (from their footers,
    here): a column a run lacks is null there, and Spark infers nothing."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    files, footers = {}, []
    for run in runs:
        for path, footer in readable_parts(run.path / "metrics" / table)[0].items():
            files[str(path.resolve())] = run
            footers.append(footer.schema.to_arrow_schema())
    if not files:
        return None
    try:
        schema = pa.unify_schemas(footers)
    except pa.ArrowException as e:
        raise DimsterError(f"the runs' metrics/{table} disagree on a column: {str(e).splitlines()[0]}") from None
    frame = spark.read.schema(from_arrow_schema(schema)).parquet(*files)
    # Spark names a row's file as a URI ("file:/...", percent-encoded, a "+" as itself): back to the path
    uri = F.regexp_replace(F.regexp_replace(F.col("_metadata.file_path"), "^file:/+", "/"), "[+]", "%2B")
    owners = spark.createDataFrame(
        [(file, run.point, run.repeat) for file, run in files.items()], "file string, point int, repeat int"
    )
    # left: a row whose file matched no run keeps a null point, which placed() refuses rather than drop it
    return frame.withColumn("file", F.url_decode(uri)).join(F.broadcast(owners), "file", "left").drop("file")


def placed(table: pd.DataFrame, name: str) -> pd.DataFrame:
    """`table` (a result per run) when each of its rows has its run; raises when the rows of a file
    found no run by the file's path (read_runs)."""
    if table[RUN_KEYS].isna().any(axis=None):
        raise DimsterError(f"rows of metrics/{name} matched no run of the campaign by their file's path")
    return table


def run_metrics(spark, runs: list[Run]) -> pd.DataFrame:
    """One row per run (point, repeat): measured throughput, latency percentiles and costs."""
    from pyspark.sql import functions as F

    result = pd.DataFrame(columns=RUN_KEYS)
    intervals = read_runs(spark, runs, "intervals")
    if intervals is not None:
        intervals = intervals.withColumn("second", F.floor("run_time_s").cast("long"))
        throughput = placed(measured_throughput(intervals, RUN_KEYS).toPandas(), "intervals")
        result = throughput.rename(columns={"seconds": "measured_seconds"})
    histograms = read_runs(spark, runs, "histograms")
    if histograms is not None:
        wanted = sorted({metric for metric, _ in LATENCIES})
        measured = measured_latencies(histograms).where(F.col("metric").isin(*wanted))
        latencies = placed(latency_percentiles(measured, RUN_KEYS), "histograms")
        wide = pd.DataFrame(columns=RUN_KEYS)
        for (metric, percentile), column in LATENCIES.items():
            part = latencies[latencies["metric"] == metric][[*RUN_KEYS, percentile]]
            wide = wide.merge(part.rename(columns={percentile: column}), on=RUN_KEYS, how="outer")
        result = result.merge(wide, on=RUN_KEYS, how="outer")
    if intervals is not None:
        tables = {table: read_runs(spark, runs, table) for table in ("workers", "client_stats", "brokers")}
        result = result.merge(_costs(runs, intervals, **tables), on=RUN_KEYS, how="left")
    return result


def _costs(runs: list[Run], intervals, workers, client_stats, brokers) -> pd.DataFrame:
    """Per run: the compression ratio the brokers saw, the workers' CPU (cores, and per MB where
    workers host one role only), the consumers' records per fetch request and bytes fetched per byte
    consumed, the producers' queue time and request latency as they saw them."""
    cpu = worker_cpu(workers, intervals, RUN_KEYS).toPandas() if workers is not None else None
    ratios = client_ratios(client_stats, intervals, RUN_KEYS).toPandas() if client_stats is not None else None
    compression = _compression_ratios(runs, intervals, brokers)
    rows = []
    for run in runs:
        row = {"point": run.point, "repeat": run.repeat, **COSTS_NONE}
        row["compression_ratio"] = compression.get((run.point, run.repeat))
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


def _compression_ratios(runs: list[Run], intervals, brokers) -> dict[tuple[int, int], float | None]:
    """Per run: throughput.compression_ratios' ratio, the topics from its run.json."""
    topics = {(run.point, run.repeat): read_run_info(run.path / "run.json").get("topics") or [] for run in runs}
    return {run: found["ratio"] for run, found in compression_ratios(intervals, brokers, topics, RUN_KEYS).items()}
