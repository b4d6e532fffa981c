"""The Spark summary of a run: reads `metrics/*` Parquet, writes `summary/summary.json` plus CSV and
Parquet tables. Percentiles come from merging histogram buckets, exact to the bucket bound (1%)."""

import json
import math
from pathlib import Path

import pandas as pd

from dimster.errors import DimsterError
from dimster.metrics.histogram import GAMMA
from dimster.metrics.schema import WAITING_NOTED, WARMUP_PREFIX
from dimster.pipeline.broker_summary import summarize_brokers, topic_bytes_in
from dimster.pipeline.spark import spark_session
from dimster.results.bundle import is_run_folder, load_timeline

# Quantiles as exact fractions: rank = ceil(total * num / den) in integer arithmetic.
QUANTILES = {
    "p50": (50, 100),
    "p75": (75, 100),
    "p90": (90, 100),
    "p95": (95, 100),
    "p99": (99, 100),
    "p99_9": (999, 1000),
    "p99_99": (9999, 10000),
}
TABLES = ("intervals", "histograms", "delivery_counts", "client_stats", "brokers", "group_lag", "workers")
# consumer groups have no delivery counts; external brokers no scrape; runs without groups no lag;
# runs from before workers reported their CPU no workers
OPTIONAL_TABLES = ("delivery_counts", "brokers", "group_lag", "workers")
# the producers' own request latency (average) past which, and past this many times the brokers' Produce
# p99, the summary notes that requests waited outside the brokers' handling
QUEUED_REQUEST_MS = 10.0
QUEUED_REQUEST_RATIO = 5.0
THROUGHPUT_FIELDS = ("produced_msgs_per_s", "produced_mb_per_s", "consumed_msgs_per_s", "consumed_mb_per_s")


def read_run_info(path: Path) -> dict:
    """run.json, or {} when it is missing or unreadable (a run killed while writing it)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def latency_percentiles(histograms, keys: list[str]):
    """Per `keys` + metric: count, p50 ... p99.99 and max in milliseconds, from merged buckets."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    group = [*keys, "metric"]
    merged = histograms.groupBy(*group, "bucket").agg(F.sum("count").alias("n"))
    upto = Window.partitionBy(*group).orderBy("bucket").rowsBetween(Window.unboundedPreceding, 0)
    merged = merged.withColumn("cum", F.sum("n").over(upto)).withColumn(
        "total", F.sum("n").over(Window.partitionBy(*group))
    )
    picks = [
        F.min(F.when(F.col("cum") >= F.expr(f"(total * {num} + {den - 1}) div {den}"), F.col("bucket"))).alias(name)
        for name, (num, den) in QUANTILES.items()
    ]
    buckets = merged.groupBy(*group).agg(F.first("total").alias("count"), *picks)
    bounds = histograms.groupBy(*group).agg(F.min("hist_min").alias("min_us"), F.max("hist_max").alias("max_us"))
    result = buckets.join(bounds, on=group)
    for name in QUANTILES:  # the bucket's representative value, kept within the observed min and max
        value = F.pow(F.lit(GAMMA), F.col(name)) * 2 / (GAMMA + 1)
        value = F.greatest(F.least(value, F.col("max_us")), F.col("min_us"))
        result = result.withColumn(name, value / 1000)
    return result.withColumn("max", F.col("max_us") / 1000).drop("min_us", "max_us")


def summarize(run_dir: Path, master: str) -> dict:
    """Write `summary/` for the run in `run_dir`; returns summary.json's content."""
    if not run_dir.is_dir() or not is_run_folder(run_dir):
        raise DimsterError(f"{run_dir} is not a dimster run folder (no run.json, no metrics/)")
    metrics = run_dir / "metrics"
    present = [t for t in TABLES if any((metrics / t).glob("*.parquet"))]
    missing = [t for t in TABLES if t not in present]
    run_info = read_run_info(run_dir / "run.json")
    notes = []
    if not (run_dir / "run.json").exists():
        notes.append("run.json is missing: versions, totals and status unknown")
    elif not run_info:
        notes.append("run.json is unreadable: versions, totals and status unknown")
    elif run_info.get("status") not in ("completed",):
        notes.append(f"the run did not complete (status {run_info.get('status')}): the summary covers what exists")
    notes += [f"metrics/{t} is missing" for t in missing if t not in OPTIONAL_TABLES]
    out = run_dir / "summary"
    out.mkdir(exist_ok=True)
    summary: dict = {
        "run": run_info.get("run_id", run_dir.name),
        "status": run_info.get("status"),
        "totals": run_info.get("totals"),
        "notes": notes,
        "timeline": load_timeline(run_dir),
        # seconds each group's consumers took to hold their assignments before load started
        "consumer_assignment_seconds": run_info.get("consumer_assignment_seconds"),
        "mode": run_info.get("mode"),  # what a test mode found: a limit, a drain, a correctness verdict
        # per group: acked = accepted + rejected + archived + unconsumed + in_doubt + lost
        "account": run_info.get("account"),
    }
    with spark_session(master, run_dir / "logs" / "spark.log") as spark:
        try:
            groups, topics = list(run_info.get("groups") or {}), list(run_info.get("topics") or [])
            tables = _spark_tables(spark, metrics, present, summary, groups, topics)
        except Exception as e:  # a Spark failure: one line, the run folder stays as it was
            # read while Spark's JVM still runs: a Java exception's text comes from there
            raise DimsterError(f"Spark could not summarize {run_dir}: {str(e).strip().splitlines()[0]}") from None
    if "throughput_per_second" in tables:
        summary["share_outcomes"] = _share_outcomes(run_info)
    for name, table in tables.items():
        table.to_csv(out / f"{name}.csv", index=False)
        table.to_parquet(out / f"{name}.parquet", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=_json_default))
    return summary


def _spark_tables(
    spark, metrics: Path, present: list[str], summary: dict, groups: list[str], topics: list[str]
) -> dict[str, pd.DataFrame]:
    """Run the Spark side: fills `summary` with overall numbers, returns the tables to write."""
    from pyspark.sql import functions as F

    frames = {t: spark.read.parquet(str(metrics / t)) for t in present}
    tables: dict[str, pd.DataFrame] = {}
    if "intervals" in frames:
        intervals = frames["intervals"].withColumn("second", F.floor("run_time_s").cast("long"))
        tables["throughput_per_second"] = _throughput(intervals).toPandas()
        summary["throughput"] = _overall_throughput(intervals)
        summary["polls"] = _polls(intervals)
    if "histograms" in frames:
        h = frames["histograms"].withColumn("second", F.floor("run_time_s").cast("long"))
        measured = measured_latencies(h)
        overall = latency_percentiles(measured, []).toPandas()
        summary["latency_ms"] = {r["metric"]: _row(r) for r in overall.to_dict("records")}
        # Per second: whatever was observed in that second, warm-up records included.
        observed = h.withColumn("metric", F.regexp_replace("metric", f"^{WARMUP_PREFIX}", ""))
        tables["latency_per_second"] = latency_percentiles(observed, ["second"]).orderBy("metric", "second").toPandas()
        e2e = measured.where(F.col("metric") == "e2e")
        tables["latency_per_partition"] = latency_percentiles(e2e, ["topic", "partition"]).toPandas()
        tables["latency_per_client"] = latency_percentiles(measured, ["client_id", "role"]).toPandas()
    if "delivery_counts" in frames:
        counts = frames["delivery_counts"].groupBy("delivery_count").agg(F.sum("count").alias("records"))
        tables["delivery_counts"] = counts.orderBy("delivery_count").toPandas()
        summary["delivery_counts"] = {
            int(r["delivery_count"]): int(r["records"]) for r in tables["delivery_counts"].to_dict("records")
        }
    if "client_stats" in frames and "intervals" in frames:
        per_client = client_ratios(frames["client_stats"], frames["intervals"])
        tables["client_stats"] = per_client.toPandas()
        summary["client_stats"] = overall_client_ratios(tables["client_stats"])
    if "workers" in frames and "intervals" in frames:
        tables["worker_cpu"] = worker_cpu(frames["workers"], frames["intervals"]).toPandas()
        summary["worker_cpu"] = overall_worker_cpu(tables["worker_cpu"])
        summary["notes"] += late_wake_notes(tables["worker_cpu"])
    if "brokers" in frames:
        summary["brokers"], broker_tables = summarize_brokers(frames["brokers"], groups)
        tables.update(broker_tables)
        summary["notes"] += queued_request_notes(summary.get("client_stats") or {}, summary["brokers"])
    if "intervals" in frames:
        summary["compression"] = _compression(frames, topics, summary.get("client_stats") or {})
    if "group_lag" in frames:
        totals = frames["group_lag"].where(F.col("partition") == -1).select("group", "run_time_s", "lag", "backlog")
        tables["broker_lag"] = totals.orderBy("group", "run_time_s").toPandas()
        summary["broker_lag"] = _broker_lag(tables["broker_lag"])
    return tables


def _broker_lag(table: pd.DataFrame) -> dict:
    """Per group: the brokers' lag at the last reading and at most, and dimster's backlog at most."""
    out = {}
    for group, rows in table.groupby("group"):
        out[group] = {
            "end": int(rows["lag"].iloc[-1]),
            "max": int(rows["lag"].max()),
            "backlog_max": None if rows["backlog"].isna().all() else int(rows["backlog"].max()),
        }
    return out


def _json_default(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def _row(record: dict) -> dict:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items() if k != "metric"}


def _throughput(intervals):
    from pyspark.sql import functions as F

    per_second = intervals.groupBy("second").agg(
        F.sum("sent").alias("sent"),
        F.sum("sent_bytes").alias("sent_bytes"),
        F.sum("acked").alias("acked"),
        F.sum("received").alias("received"),
        F.sum("received_bytes").alias("received_bytes"),
        F.sum(
            F.when(F.col("role") == "share_consumer", F.col("accepted") + F.col("rejected")).otherwise(
                F.col("received")
            )
        ).alias("settled"),
        F.first("phase").alias("phase"),
        *(F.sum(c).alias(c) for c in ("renewed", "lock_timeouts") if c in intervals.columns),
    )
    # A client's target is a level, not a count: average it per client within the second, then add
    # the clients up; it is 0 once producers have stopped.
    in_load = F.col("phase").isin("warmup", "measure")
    targets = (
        intervals.where(F.col("role") == "producer")
        .groupBy("second", "client_id")
        .agg(F.avg(F.when(in_load, F.col("target_rate")).otherwise(0)).alias("t"))
        .groupBy("second")
        .agg(F.sum("t").alias("target_rate"))
    )
    per_second = per_second.join(targets, on="second", how="left").fillna({"target_rate": 0.0})
    from pyspark.sql import Window

    upto = Window.orderBy("second").rowsBetween(Window.unboundedPreceding, 0)
    consumers = intervals.where(F.col("role") != "producer")
    topics = consumers.select("topic").distinct().count() or 1
    groups_per_topic = (consumers.select("group").distinct().count() or topics) / topics
    # Backlog: acknowledged records not yet settled, summed over groups (each group of a topic reads
    # every record of it).
    return per_second.withColumn(
        "backlog", F.sum("acked").over(upto) * groups_per_topic - F.sum("settled").over(upto)
    ).orderBy("second")


def measured_latencies(histograms):
    """The measured phase's latencies: records intended to be sent in it, whenever they were consumed
    (warm-up records carry WARMUP_PREFIX; runs from before it: reports during warm-up)."""
    from pyspark.sql import functions as F

    return histograms.where(~F.col("metric").startswith(WARMUP_PREFIX) & (F.col("phase") != "warmup"))


def with_covered(reports, per_worker: list[str]):
    """`reports` (a row per worker report) with `covered`: the seconds from the end of the worker's
    previous report, or from load start for its first, to the end of this one."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    previous = F.lag("end_time").over(Window.partitionBy(*per_worker).orderBy("end_time"))
    load_started = F.col("end_time") - F.col("run_time_s")
    return reports.withColumn("covered", F.col("end_time") - F.coalesce(previous, load_started))


def measured_throughput(intervals, keys: list[str]):
    """Per `keys`: produced and consumed msg/s and MB/s of the measured phase, and its `seconds`.
    Each worker's counts are divided by the time its own measured reports covered (from the end of
    its previous report, or from load start), then summed over workers: a phase that ends between
    two reports is not counted as whole seconds it did not fill."""
    from pyspark.sql import functions as F

    per_worker = [*keys, "worker"]
    reports = intervals.select(*per_worker, "end_time", "run_time_s", "phase").distinct()
    covered = (
        with_covered(reports, per_worker)
        .where(F.col("phase") == "measure")
        .groupBy(*per_worker)
        .agg(F.sum("covered").alias("covered"))
    )
    counts = (
        intervals.where(F.col("phase") == "measure")
        .groupBy(*per_worker)
        .agg(*(F.sum(c).alias(c) for c in ("sent", "sent_bytes", "received", "received_bytes")))
    )

    def per_second(column: str, scale: float = 1.0):
        return F.sum(F.try_divide(F.coalesce(F.col(column), F.lit(0)), F.col("covered"))) / scale

    return (
        counts.join(covered, on=per_worker)
        .groupBy(*keys)
        .agg(
            F.round(F.max("covered"), 3).alias("seconds"),
            per_second("sent").alias("produced_msgs_per_s"),
            per_second("sent_bytes", 1e6).alias("produced_mb_per_s"),
            per_second("received").alias("consumed_msgs_per_s"),
            per_second("received_bytes", 1e6).alias("consumed_mb_per_s"),
        )
    )


def _overall_throughput(intervals) -> dict:
    row = measured_throughput(intervals, []).first()
    seconds = (row["seconds"] or 0) if row else 0
    if not seconds:
        return {"seconds": 0}
    return {key: row[key] for key in ("seconds", *THROUGHPUT_FIELDS)}


def _polls(intervals) -> dict:
    from pyspark.sql import functions as F

    row = (
        intervals.where(F.col("role") != "producer")
        .agg(
            F.sum("polls").alias("polls"), F.sum("received").alias("received"), F.max("max_poll_records").alias("most")
        )
        .first()
    )
    polls = row["polls"] or 0
    return {
        "polls": polls,
        "records_per_poll": (row["received"] or 0) / polls if polls else None,
        "max_records_in_a_poll": row["most"],
    }


def client_ratios(stats, intervals, keys: list[str] | None = None):
    """Per `keys` (a campaign's point and repeat) and client: batch sizes and the time records waited
    in the client (producers), fetch requests, records per fetch and bytes fetched per byte consumed
    (consumers), the requests' latency as the client saw it. Counters are cumulative: a client's
    change is max - min."""
    from pyspark.sql import functions as F

    per_client = [*(keys or []), "client_id"]

    fetches = F.col("requests_fetch") + F.col("requests_sharefetch")
    compression = (  # absent in runs from before it was kept
        [F.avg(F.when(F.col("compression_rate_avg") > 0, F.col("compression_rate_avg"))).alias("compression_rate_avg")]
        if "compression_rate_avg" in stats.columns
        else []
    )
    # the clients' own latency averages, over the measured phase (absent in runs from before they were kept)
    measured = F.col("phase") == "measure"
    latencies = [
        F.avg(F.when(measured & (F.col(column) > 0), F.col(column))).alias(column)
        for column in ("queue_time_avg_ms", "request_latency_avg_ms")
        if column in stats.columns
    ]
    changes = stats.groupBy(*per_client, "role").agg(
        F.avg(F.when(F.col("batch_records_avg") > 0, F.col("batch_records_avg"))).alias("batch_records_avg"),
        F.avg(F.when(F.col("batch_bytes_avg") > 0, F.col("batch_bytes_avg"))).alias("batch_bytes_avg"),
        *compression,
        *latencies,
        (F.max(fetches) - F.min(fetches)).alias("fetch_requests"),
        (F.max("rx_bytes") - F.min("rx_bytes")).alias("rx_bytes"),
        (F.max("tx_requests") - F.min("tx_requests")).alias("requests"),
    )
    libraries = (  # "java+librdkafka" for a client switched live; absent in runs from before clientLibrary
        [F.concat_ws("+", F.sort_array(F.collect_set("library"))).alias("library")]
        if "library" in intervals.columns
        else []
    )
    # The counters' changes cover the reports from a client's first statistics to its last (they come
    # every 5 s, the first 5 s after the client starts): the ratios divide by what was consumed over
    # those same reports, not over the whole run.
    covered = stats.groupBy(*per_client).agg(F.min("end_time").alias("stats_from"), F.max("end_time").alias("stats_to"))
    in_window = (F.col("end_time") > F.col("stats_from")) & (F.col("end_time") <= F.col("stats_to"))
    consumed = (
        intervals.join(covered, on=per_client, how="left")
        .groupBy(*per_client)
        .agg(
            F.sum("received").alias("records_consumed"),
            F.sum("received_bytes").alias("bytes_consumed"),
            F.sum(F.when(in_window, F.col("received"))).alias("records_covered"),
            F.sum(F.when(in_window, F.col("received_bytes"))).alias("bytes_covered"),
            *libraries,
        )
    )
    return (
        changes.join(consumed, on=per_client, how="left")
        .withColumn("records_per_fetch", F.try_divide("records_covered", "fetch_requests"))
        .withColumn("rx_bytes_per_consumed_byte", F.try_divide("rx_bytes", "bytes_covered"))
    )


def overall_client_ratios(table: pd.DataFrame) -> dict:
    producers = table[table.role == "producer"]
    consumers = table[table.role != "producer"]
    fetches = consumers.fetch_requests.sum()
    consumed_bytes = consumers.bytes_covered.sum()
    return {
        "producer_batch_records_avg": _num(producers.batch_records_avg.mean()),
        "producer_batch_bytes_avg": _num(producers.batch_bytes_avg.mean()),
        "producer_compression_rate_avg": _mean_of(producers, "compression_rate_avg"),
        "producer_queue_time_ms_avg": _mean_of(producers, "queue_time_avg_ms"),
        "producer_request_latency_ms_avg": _mean_of(producers, "request_latency_avg_ms"),
        "consumer_request_latency_ms_avg": _mean_of(consumers, "request_latency_avg_ms"),
        "consumer_fetch_requests": int(fetches) if fetches == fetches else 0,
        "records_per_fetch": _num(consumers.records_covered.sum() / fetches) if fetches else None,
        "rx_bytes_per_consumed_byte": _num(consumers.rx_bytes.sum() / consumed_bytes) if consumed_bytes else None,
    }


def _mean_of(clients: pd.DataFrame, column: str) -> float | None:
    """The clients' mean of `column`; None where none reported it (or the run is older than it)."""
    return _num(clients[column].mean()) if column in clients else None


def worker_cpu(workers, intervals, keys: list[str] | None = None):
    """Per `keys` (a campaign's point and repeat) and worker, over the measured phase: the CPU seconds
    its process used, the seconds its reports covered (from the end of its previous report, as for
    throughput), its largest resident memory and thread count, how long its threads waited to run (the
    share of the time its wake probe spent waiting, the mean and the largest lateness of a wake-up), the
    clients it hosted with their roles, and the MB they produced and consumed. (Bundles from before
    memory or the wake probe have no such columns.)"""
    from pyspark.sql import functions as F

    per_worker = [*(keys or []), "worker"]
    measured = with_covered(workers, per_worker).where(F.col("phase") == "measure")
    sizes = [F.max(column).alias(column) for column in ("rss_bytes", "threads") if column in workers.columns]
    wake_lag = []
    if "wakes" in workers.columns:  # bundles from before the wake probe have none
        wake_lag = [
            F.sum("wake_lag_ms_sum").alias("wake_lag_ms_sum"),
            F.try_divide(F.sum("wake_lag_ms_sum"), F.sum("wakes")).alias("wake_lag_ms_mean"),
            F.max("wake_lag_ms_max").alias("wake_lag_ms_max"),
        ]
    cpu = measured.groupBy(*per_worker).agg(
        F.sum("cpu_seconds").alias("cpu_seconds"), F.sum("covered").alias("seconds"), *sizes, *wake_lag
    )
    hosted = (
        intervals.where(F.col("phase") == "measure")
        .groupBy(*per_worker)
        .agg(
            F.concat_ws("+", F.sort_array(F.collect_set("role"))).alias("roles"),
            F.countDistinct("client_id").alias("clients"),
            (F.sum("sent_bytes") / 1e6).alias("produced_mb"),
            (F.sum("received_bytes") / 1e6).alias("consumed_mb"),
        )
    )
    table = cpu.join(hosted, on=per_worker, how="left").withColumn("cores", F.try_divide("cpu_seconds", "seconds"))
    if wake_lag:  # the share of the measured time its probe spent waiting to run past its due time
        waiting = F.try_divide(F.col("wake_lag_ms_sum") / 1000, F.col("seconds"))
        table = table.withColumn("wake_wait_share", F.least(waiting, F.lit(1.0))).drop("wake_lag_ms_sum")
    if "rss_bytes" in workers.columns:
        table = table.withColumn("memory_mb", F.col("rss_bytes") / 1e6).drop("rss_bytes")
    return table.orderBy(*per_worker)


def late_wake_notes(table: pd.DataFrame) -> list[str]:
    """A note per worker whose threads spent enough of the measured phase waiting to run that its
    clients' figures measure the worker: their polls and acknowledgements waited for a core or the GIL."""
    if "wake_wait_share" not in table:
        return []
    notes = []
    for row in table.to_dict("records"):
        share = row["wake_wait_share"]
        if share is None or share != share or share < WAITING_NOTED:
            continue
        notes.append(
            f"worker {row['worker']}: its threads waited to run {share:.0%} of the measured phase (a wake-up "
            f"{row['wake_lag_ms_mean']:.1f} ms late on average, {row['wake_lag_ms_max']:.0f} ms at most) with "
            f"{row.get('clients') or 0:.0f} client(s): their latencies and rates include that wait, not only "
            "Kafka's; spread the clients over more workers, and more hosts when this one's cores are busy"
        )
    return notes


def queued_request_notes(ratios: dict, brokers: dict) -> list[str]:
    """A note when the producers saw their requests take many times what the brokers took to handle
    Produce: the requests waited between the two (on the producers' connections, where a broker takes
    one request at a time, in the brokers' network threads, or for a core)."""
    seen = ratios.get("producer_request_latency_ms_avg")
    produce = [r["p99_ms"] for r in brokers.get("requests") or [] if r["request"] == "Produce" and r["p99_ms"]]
    handled = max(produce, default=None)
    if not seen or not handled or seen < max(QUEUED_REQUEST_MS, QUEUED_REQUEST_RATIO * handled):
        return []
    batch = ratios.get("producer_batch_records_avg")
    fuller = (
        f"; {batch:.1f} records per batch: a larger linger.ms sends fewer, fuller requests"
        if batch and batch < 2
        else ""
    )
    return [
        f"the producers saw their requests take {seen:.0f} ms on average, the brokers handled Produce in "
        f"{handled:.1f} ms at p99: the requests waited outside the brokers' handling{fuller}"
    ]


def overall_worker_cpu(table: pd.DataFrame) -> dict:
    """The cores, memory (MB, each worker's largest) and threads the workers used in all, the largest
    share of time any worker's threads waited to run (late_wake_notes), and the CPU
    seconds per MB of the workers that host only producers (or only consumers): a worker's CPU cannot
    be split between roles it mixes. None where there is nothing to tell (no measured report, no such
    worker, nothing moved, a bundle from before memory was reported)."""
    roles = [set(r.split("+")) if isinstance(r, str) and r else set() for r in table.get("roles", [])]

    def per_mb(hosting, mb: str) -> float | None:
        hosts = table.iloc[[i for i, r in enumerate(roles) if r and hosting(r)]]
        moved = hosts[mb].sum() if len(hosts) else 0
        return _num(hosts.cpu_seconds.sum() / moved) if moved > 0 else None

    def total(column: str) -> float | None:
        return _num(table[column].sum()) if len(table) and column in table else None

    return {
        "cores": total("cores"),
        "wake_wait_share": _num(table.wake_wait_share.max()) if "wake_wait_share" in table else None,
        "memory_mb": total("memory_mb"),
        "threads": total("threads"),
        "producer_cpu_seconds_per_mb": per_mb(lambda r: r == {"producer"}, "produced_mb"),
        "consumer_cpu_seconds_per_mb": per_mb(lambda r: "producer" not in r, "consumed_mb"),
    }


def _compression(frames: dict, topics: list[str], client_stats: dict) -> dict:
    """What compression achieved over the whole run, and the Java producers' own compression rate."""
    return {
        **compression_ratio(frames["intervals"], frames.get("brokers"), topics),
        "producer_compression_rate_avg": client_stats.get("producer_compression_rate_avg"),
    }


def compression_ratio(intervals, brokers, topics: list[str]) -> dict:
    """The payload bytes the producers were handed against the bytes the brokers took in for the
    run's `topics` (their own counters, kept from the topic's creation), whole run."""
    from pyspark.sql import functions as F

    producing = intervals.where(F.col("role") == "producer")
    payload = producing.agg(F.sum("sent_bytes")).first()[0] or 0
    if not topics:  # run.json is written at the end: a run that died has none, its producers tell
        topics = [row["topic"] for row in producing.select("topic").distinct().collect()]
    taken_in = topic_bytes_in(brokers, topics) if brokers is not None and topics else None
    return {
        "payload_bytes": int(payload),
        "broker_bytes_in": taken_in,
        "ratio": _num(payload / taken_in) if taken_in and payload else None,  # payload per byte taken in
    }


def _num(value) -> float | None:
    return None if value is None or value != value else float(value)


SHARE_OUTCOMES = (
    "accepted", "released", "rejected", "archived", "lost", "unconsumed", "duplicates", "renewed", "lock_timeouts",
)  # fmt: skip


def _share_outcomes(run_info: dict) -> dict:
    totals = run_info.get("totals") or {}
    return {key: totals.get(key) for key in SHARE_OUTCOMES}
