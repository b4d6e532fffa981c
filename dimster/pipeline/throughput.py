"""Throughput of a run from its interval rows: per second over the whole run (with the backlog), over
the measured phase (each worker's counts over the time its own reports covered), the consumers'
polls, and what compression achieved against the bytes the brokers took in."""

from dimster.pipeline.broker_summary import topic_bytes_in

THROUGHPUT_FIELDS = ("produced_msgs_per_s", "produced_mb_per_s", "consumed_msgs_per_s", "consumed_mb_per_s")


def throughput_per_second(intervals):
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


def overall_throughput(intervals) -> dict:
    row = measured_throughput(intervals, []).first()
    seconds = (row["seconds"] or 0) if row else 0
    if not seconds:
        return {"seconds": 0}
    return {key: row[key] for key in ("seconds", *THROUGHPUT_FIELDS)}


def poll_counts(intervals) -> dict:
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


def compression_ratio(intervals, brokers, topics: list[str]) -> dict:
    """compression_ratios of one run."""
    return compression_ratios(intervals, brokers, {(): topics}, [])[()]


def compression_ratios(intervals, brokers, topics: dict[tuple, list[str]], keys: list[str]) -> dict[tuple, dict]:
    """Per run (its values of `keys`, a campaign's point and repeat; () for one run) of `topics`: the
    payload bytes its producers were handed against the bytes the brokers took in for its topics
    (topic_bytes_in), whole run, and their ratio (payload per byte taken in). A run without topics
    (run.json is written at the end: a run that died has none) is taken at its producers' word."""
    from pyspark.sql import functions as F

    producing = intervals.where(F.col("role") == "producer")
    payloads = producing.groupBy(*keys).agg(F.sum("sent_bytes").alias("payload")).collect()
    payload = {tuple(row[k] for k in keys): row["payload"] or 0 for row in payloads}
    named = {run: list(names) for run, names in topics.items()}
    if unnamed := {run for run, names in topics.items() if not names}:
        for row in producing.select(*keys, "topic").distinct().collect():
            if (run := tuple(row[k] for k in keys)) in unnamed:
                named[run].append(row["topic"])
    taken_in: dict[tuple, float] = {}
    own = [(*run, topic) for run, names in named.items() for topic in names]
    if brokers is not None and own:
        run_topics = intervals.sparkSession.createDataFrame(own, [*keys, "topic"])
        for row in topic_bytes_in(brokers, run_topics, keys).collect():
            if row["bytes_in"]:
                taken_in[tuple(row[k] for k in keys)] = float(row["bytes_in"])
    found = {}
    for run in topics:
        sent, took = payload.get(run, 0), taken_in.get(run)
        ratio = number(sent / took) if took and sent else None
        found[run] = {"payload_bytes": int(sent), "broker_bytes_in": took, "ratio": ratio}
    return found


def number(value) -> float | None:
    """`value` as a float; None for None and NaN."""
    return None if value is None or value != value else float(value)
