"""Per-client and per-worker tables of a run: the clients' own statistics as ratios (batch sizes,
records per fetch, bytes fetched per byte consumed, request latencies), the workers' CPU, memory and
wake-up lateness, and the notes they give."""

import pandas as pd

from dimster.metrics.schema import INTERVAL_METRICS, WAITING_NOTED
from dimster.pipeline.throughput import number, with_covered

# the producers' own request latency (average) past which, and past this many times the brokers' Produce
# p99, the summary notes that requests waited outside the brokers' handling
QUEUED_REQUEST_MS = 10.0
QUEUED_REQUEST_RATIO = 5.0


def client_ratios(stats, intervals, keys: list[str] | None = None):
    """Per `keys` (a campaign's point and repeat) and client: batch sizes and the time records waited
    in the client (producers), fetch requests, records per fetch and bytes fetched per byte consumed
    (consumers), the requests' latency as the client saw it. Counters are cumulative: a client's
    change is max - min."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_client = [*(keys or []), "client_id"]

    fetches = F.col("requests_fetch") + F.col("requests_sharefetch")
    compression = (  # absent in runs from before it was kept
        [F.avg(F.when(F.col("compression_rate_avg") > 0, F.col("compression_rate_avg"))).alias("compression_rate_avg")]
        if "compression_rate_avg" in stats.columns
        else []
    )
    # The clients' own latency averages over the measured phase (absent in runs from before they were
    # kept). Each is the client's average since its previous statistics: the first report of the measured
    # phase covers warm-up's requests too, so a report counts when the one before it was measured as well.
    before = F.lag("phase").over(Window.partitionBy(*per_client).orderBy("end_time"))
    stats = stats.withColumn("window_measured", (F.col("phase") == "measure") & (before == "measure"))
    measured = F.col("window_measured")
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
    # the interval counters the report's client tables show (metrics/schema.py), whole run
    counted = [F.sum(m.name).alias(m.name) for m in INTERVAL_METRICS if m.client_table and m.name in intervals.columns]
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
            *counted,
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
        "producer_batch_records_avg": number(producers.batch_records_avg.mean()),
        "producer_batch_bytes_avg": number(producers.batch_bytes_avg.mean()),
        "producer_compression_rate_avg": _mean_of(producers, "compression_rate_avg"),
        "producer_queue_time_ms_avg": _mean_of(producers, "queue_time_avg_ms"),
        "producer_request_latency_ms_avg": _mean_of(producers, "request_latency_avg_ms"),
        "consumer_request_latency_ms_avg": _mean_of(consumers, "request_latency_avg_ms"),
        "consumer_fetch_requests": int(fetches) if fetches == fetches else 0,
        "records_per_fetch": number(consumers.records_covered.sum() / fetches) if fetches else None,
        "rx_bytes_per_consumed_byte": number(consumers.rx_bytes.sum() / consumed_bytes) if consumed_bytes else None,
    }


def _mean_of(clients: pd.DataFrame, column: str) -> float | None:
    """The clients' mean of `column`; None where none reported it (or the run is older than it)."""
    return number(clients[column].mean()) if column in clients else None


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
        return number(hosts.cpu_seconds.sum() / moved) if moved > 0 else None

    def total(column: str) -> float | None:
        return number(table[column].sum()) if len(table) and column in table else None

    return {
        "cores": total("cores"),
        "wake_wait_share": number(table.wake_wait_share.max()) if "wake_wait_share" in table else None,
        "memory_mb": total("memory_mb"),
        "threads": total("threads"),
        "producer_cpu_seconds_per_mb": per_mb(lambda r: r == {"producer"}, "produced_mb"),
        "consumer_cpu_seconds_per_mb": per_mb(lambda r: "producer" not in r, "consumed_mb"),
    }
