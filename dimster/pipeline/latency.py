"""Latency percentiles of a run's histogram rows: buckets merged per group, then each percentile
read off the cumulative counts, exact to the bucket bound (1%)."""

from dimster.metrics.histogram import GAMMA
from dimster.metrics.schema import WARMUP_PREFIX

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


def measured_latencies(histograms):
    """The measured phase's latencies: records intended to be sent in it, whenever they were consumed
    (warm-up records carry WARMUP_PREFIX; runs from before it: reports during warm-up)."""
    from pyspark.sql import functions as F

    return histograms.where(~F.col("metric").startswith(WARMUP_PREFIX) & (F.col("phase") != "warmup"))
