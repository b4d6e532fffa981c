"""The brokers' side of a run, from the samples scraped into metrics/brokers/ (their JMX exporter,
every 5 s): request rates and latency per API, purgatory sizes over time, and the share-group
metrics (records acknowledged and dead-lettered: share_meters.py). Counters become rates between the
first and last scrape of the measured phase; Kafka's latency percentiles (decaying samples of the last
minutes, served in seconds) are taken as the median of the measured scrapes, and their largest value,
in ms."""

import pandas as pd

from dimster.pipeline.share_meters import ACKS, share_meters

REQUEST_APIS = ("Produce", "Fetch", "ShareFetch", "ShareAcknowledge")
PERCENTILES = {"0.50": "p50_ms", "0.99": "p99_ms", "0.999": "p999_ms"}
TOTAL_TIME = "kafka_network_request_totaltime_seconds"


def summarize_brokers(brokers, groups: list[str]) -> tuple[dict, dict[str, pd.DataFrame]]:
    """(summary.json's `brokers`, the tables to write) of the Spark frame of metrics/brokers/. A
    broker keeps the share partitions of earlier runs' groups: only the run's `groups` count."""
    from pyspark.sql import functions as F

    measured = brokers.where(F.col("phase") == "measure")
    if measured.isEmpty():  # a run stopped in its warm-up: what there is
        measured = brokers
    label = F.col("labels").getItem
    requests = _requests(measured, label)
    counters = _counter_rates(measured, label)
    purgatory = (
        brokers.where(F.col("metric") == "kafka_server_purgatory_purgatorysize")
        .select("run_time_s", "phase", "broker", label("operation").alias("operation"), F.col("value").alias("size"))
        .orderBy("operation", "broker", "run_time_s")
        .toPandas()
    )
    in_flight = (
        brokers.where(F.col("metric") == "kafka_server_share_partition_in_flight_messages")
        .where(label("group").isin(*groups))
        .select(
            "run_time_s",
            "phase",
            "broker",
            label("group").alias("group"),
            label("topic").alias("topic"),
            label("partition").cast("int").alias("partition"),
            F.col("value").alias("in_flight_messages"),
        )
        .orderBy("group", "topic", "partition", "run_time_s")
        .toPandas()
    )
    measured_purgatory, measured_in_flight = _measured(purgatory), _measured(in_flight)
    dead_letters, share_records = share_meters(brokers, groups)
    summary = {
        "scrapes": brokers.select("end_time", "broker").distinct().count(),
        "requests": requests.astype(object).where(requests.notna(), None).to_dict("records"),
        "purgatory": [
            {"broker": int(b), "operation": op, "size_avg": float(g["size"].mean()), "size_max": float(g["size"].max())}
            for (b, op), g in measured_purgatory.groupby(["broker", "operation"])
            if g["size"].max() > 0
        ],
        "bytes_in_per_s": counters.get(("kafka_server_topics_bytesin_total", "")),
        "bytes_out_per_s": counters.get(("kafka_server_topics_bytesout_total", "")),
        "share": {
            "acknowledgements_per_s": {ack: rate for (metric, ack), rate in counters.items() if metric == ACKS},
            "acquisition_lock_timeouts_per_s": counters.get(
                ("kafka_server_share_partition_acquisition_lock_timeouts_total", "")
            ),
            "in_flight_messages": [
                {
                    "group": group,
                    "topic": topic,
                    "partition": int(partition),
                    "avg": float(g.in_flight_messages.mean()),
                    "max": float(g.in_flight_messages.max()),
                }
                for (group, topic, partition), g in measured_in_flight.groupby(["group", "topic", "partition"])
            ],
            # per group with a dead-letter queue (KIP-1191): records written there, produce requests, failed ones
            "dead_letters": dead_letters,
        },
    }
    tables = {
        "broker_requests": requests,
        "broker_purgatory": purgatory,
        "share_partition_in_flight": in_flight,
        "broker_share_records": share_records,
    }
    return summary, tables


def topic_bytes_in(brokers, run_topics, keys: list[str]):
    """The bytes the brokers took in from producers for each run's topics over the whole run, from
    their per-topic counters: the run's topics are its own, so a counter's first scrape counts whole,
    and so does a counter that started again (its broker restarted). `run_topics`: a frame of `keys`
    (a campaign's point and repeat; none for one run) and topic. A frame of `keys` and bytes_in."""
    from pyspark.sql import functions as F

    counters = _topic_bytes_in_counters(brokers).join(F.broadcast(run_topics), [*keys, "topic"])
    return _taken_in(counters, keys)


def _topic_bytes_in_counters(brokers):
    from pyspark.sql import functions as F

    topic = F.col("labels").getItem("topic")
    return brokers.where(F.col("metric") == "kafka_server_topic_bytesin_total").withColumn("topic", topic)


def _taken_in(counters, keys: list[str]):
    """Per `keys`: the sum of each broker's per-topic counter steps (a first scrape or a restarted counter whole)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    before = F.lag("value").over(Window.partitionBy(*keys, "broker", "topic").orderBy("end_time"))
    value = F.col("value")
    step = F.when(before.isNull() | (value < before), value).otherwise(value - before)
    return counters.withColumn("step", step).groupBy(*keys).agg(F.sum("step").alias("bytes_in"))


def _measured(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the measured phase; all rows when the run stopped before it."""
    measured = table[table.phase == "measure"]
    return measured if not measured.empty else table


def _requests(measured, label) -> pd.DataFrame:
    """Per broker and API: requests per second and total time percentiles (ms)."""
    from pyspark.sql import functions as F

    # seconds back to ms, to the µs: Kafka's own figures again (the exporter multiplied them by 0.001)
    total_time = measured.where(F.col("metric") == TOTAL_TIME).withColumn("ms", F.round(F.col("value") * 1000, 3))
    times = (
        total_time.select("broker", label("request").alias("request"), label("percentile").alias("percentile"), "ms")
        .where(F.col("request").isin(*REQUEST_APIS))
        .groupBy("broker", "request")
        .pivot("percentile", list(PERCENTILES))
        .agg(F.median("ms"))
    )
    for percentile, name in PERCENTILES.items():
        times = times.withColumnRenamed(percentile, name)
    worst = (
        total_time.where(label("percentile") == "0.99")
        .groupBy("broker", label("request").alias("request"))
        .agg(F.max("ms").alias("p99_ms_max"))
    )
    requests = measured.where(F.col("metric") == "kafka_network_requests_total")
    rates = _span_rates(
        requests.withColumn("request", label("request")).withColumn("version", label("version")),
        ["broker", "request", "version"],
    )
    rates = rates.groupBy("broker", "request").agg(F.sum("rate").alias("requests_per_s"))
    table = rates.join(times, ["broker", "request"], "outer").join(worst, ["broker", "request"], "left")
    used = (F.coalesce("requests_per_s", F.lit(0.0)) > 0) | (F.coalesce("p99_ms_max", F.lit(0.0)) > 0)
    return table.where(F.col("request").isin(*REQUEST_APIS) & used).orderBy("request", "broker").toPandas()


def _span_rates(frame, keys: list[str]):
    """Per key (columns of `frame`, whose rows are a counter's scrapes): its increase per second from
    the first scrape to the last. A counter that went down started again (its broker restarted): its
    new value is all increase, as Prometheus' increase() counts it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    before = F.lag("value").over(Window.partitionBy(*keys).orderBy("end_time"))
    value = F.col("value")
    step = F.when(before.isNull(), 0.0).when(value >= before, value - before).otherwise(value)
    return (
        frame.withColumn("step", step)
        .groupBy(*keys)
        .agg(F.sum("step").alias("increase"), (F.max("end_time") - F.min("end_time")).alias("seconds"))
        .withColumn("rate", F.when(F.col("seconds") > 0, F.col("increase") / F.col("seconds")))
    )


def _counter_rates(measured, label) -> dict[tuple[str, str], float]:
    """(metric, ack_type or "") -> per second over the measured scrapes, summed over brokers and series."""
    from pyspark.sql import functions as F

    counters = measured.where(
        F.col("metric").isin(
            "kafka_server_topics_bytesin_total",
            "kafka_server_topics_bytesout_total",
            ACKS,
            "kafka_server_share_partition_acquisition_lock_timeouts_total",
        )
    )
    counters = counters.withColumn("series", F.to_json("labels")).withColumn(
        "ack", F.coalesce(label("ack_type"), F.lit(""))
    )
    rates = _span_rates(counters, ["metric", "broker", "series", "ack"])
    rows = rates.groupBy("metric", "ack").agg(F.sum("rate").alias("rate")).collect()
    return {(r["metric"], r["ack"]): r["rate"] for r in rows if r["rate"] is not None}
