"""Latency percentiles of a run's histogram rows: Spark merges the buckets of each group (a few hundred
rows a group, however long the run and however many clients reported), then each percentile is read
off the merged buckets' cumulative counts, exact to the bucket bound (1%)."""

import numpy as np
import pandas as pd

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


def latency_percentiles(histograms, keys: list[str]) -> pd.DataFrame:
    """Per `keys` + metric: count, p50 ... p99.99 and max in milliseconds, from merged buckets."""
    from pyspark.sql import functions as F

    group = [*keys, "metric"]
    merged = histograms.groupBy(*group, "bucket").agg(
        F.sum("count").alias("n"), F.min("hist_min").alias("min_us"), F.max("hist_max").alias("max_us")
    )
    return bucket_percentiles(merged.toPandas(), group)


def bucket_percentiles(merged: pd.DataFrame, group: list[str]) -> pd.DataFrame:
    """`merged`: a row per group and bucket with its count `n` and the group's histograms' `min_us` and
    `max_us`. A row per group, sorted by it: count, each quantile's bucket as its representative value
    (kept within the observed min and max) in ms, and max in ms."""
    columns = [*group, "count", *QUANTILES, "max"]
    if merged.empty:
        return pd.DataFrame(columns=columns)
    merged = merged.sort_values([*group, "bucket"], kind="stable", ignore_index=True)
    groups = merged.groupby(group, dropna=False, sort=False)
    result = groups.agg(count=("n", "sum"), min_us=("min_us", "min"), max_us=("max_us", "max")).reset_index()
    starts = np.flatnonzero(np.diff(groups.ngroup().to_numpy(), prepend=-1))  # each group's first row
    cumulative = groups["n"].cumsum().to_numpy(dtype=np.int64)
    total = groups["n"].transform("sum").to_numpy(dtype=np.int64)
    bucket = merged["bucket"].to_numpy(dtype=np.float64)
    low, high = result["min_us"].to_numpy(dtype=np.float64), result["max_us"].to_numpy(dtype=np.float64)
    for name, (num, den) in QUANTILES.items():
        reached = np.where(cumulative >= (total * num + den - 1) // den, bucket, np.inf)
        index = np.minimum.reduceat(reached, starts)  # the first bucket whose cumulative count reaches the rank
        value = np.power(GAMMA, index) * 2 / (GAMMA + 1)
        result[name] = np.fmax(np.fmin(value, high), low) / 1000  # fmin/fmax: a missing bound bounds nothing
    result["max"] = high / 1000
    return result[columns]


def measured_latencies(histograms):
    """The measured phase's latencies: records intended to be sent in it, whenever they were consumed
    (warm-up records carry WARMUP_PREFIX; runs from before it: reports during warm-up)."""
    from pyspark.sql import functions as F

    return histograms.where(~F.col("metric").startswith(WARMUP_PREFIX) & (F.col("phase") != "warmup"))
