"""omb-result.json: a run in OpenMessaging Benchmark's result format (TestResult, omb_records.py), so
that OMB's create_charts.py and ResultsToCsv read dimster's runs beside OMB's own.

Spark-free: pandas over the run's metrics/intervals and metrics/histograms parts, so it works with
or without a summary. OMB's series are 10 s windows of the measured phase (its stats loop sleeps 10 s);
dimster's workers report every second, so the window's seconds are added up: counts, and histogram
buckets merged. The aggregated figures come from the buckets summary.json's latency_ms merges (the
measured records: no warm-up prefix, phase not warm-up), read the same way (Histogram.percentile),
so they equal its figures; the averages are the buckets' mean (a histogram keeps no sum), within 1 %."""

import json
import math
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pyarrow.parquet as pq
import yaml

from dimster import yamlcore
from dimster.errors import DimsterError
from dimster.metrics.histogram import Histogram, bucket_value
from dimster.metrics.schema import WARMUP_PREFIX
from dimster.results.metrics_parts import readable_parts
from dimster.results.omb_records import OmbTestResult

OMB_RESULT = "omb-result.json"
INTERVAL_SECONDS = 10  # WorkloadGenerator.printAndCollectStats: Thread.sleep(10000)
TICKS = 100  # OMB's histogram.percentiles(100): HdrHistogram's percentile ticks per half distance
STATS = (("50pct", 50), ("75pct", 75), ("95pct", 95), ("99pct", 99), ("999pct", 99.9), ("9999pct", 99.99))
METRICS = ("publish", "publish_delay", "e2e")
COUNTS = ("acked", "send_errors", "received", "accepted", "rejected")
# the final workload's key for each of TestResult's fields of the workload (OMB: consumerPerSubscription)
WORKLOAD_KEYS = {
    "messageSize": "messageSize",
    "topics": "topics",
    "partitions": "partitionsPerTopic",
    "producersPerTopic": "producersPerTopic",
    "consumersPerTopic": "consumersPerGroup",
}

Histograms = dict[Any, Histogram]


def write_omb_result(run_dir: Path, workload: str, driver: str) -> Path:
    """Write `<run_dir>/omb-result.json` for OMB workload `workload` run on driver `driver`."""
    result = omb_result(run_dir, workload, driver)
    path = run_dir / OMB_RESULT
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


def omb_result(run_dir: Path, workload: str, driver: str) -> OmbTestResult:
    """The run as TestResult, its fields in TestResult.java's order."""
    shape = workload_shape(run_dir)
    seconds = per_second(run_dir)
    measured = seconds[seconds["measured"]]
    if measured.empty:
        raise DimsterError(f"{run_dir}: no measured interval in metrics/intervals: {OMB_RESULT} not written")
    first, last = int(measured["second"].min()), int(measured["second"].max())
    windows = math.ceil((last - first + 1) / INTERVAL_SECONDS)
    per_window, overall = histograms(run_dir, first, windows)

    measured = measured.assign(window=(measured["second"] - first) // INTERVAL_SECONDS)
    counts = measured.groupby("window")[["acked", "send_errors", "received"]].sum()
    counts = counts.reindex(range(windows), fill_value=0)
    lengths = [min(INTERVAL_SECONDS, last - first + 1 - k * INTERVAL_SECONDS) for k in range(windows)]
    backlog = seconds.set_index("second")["backlog"]

    def rate(column: str) -> list[float]:
        return [float(counts[column].iloc[k]) / lengths[k] for k in range(windows)]

    def backlog_at(k: int) -> int:
        upto = backlog.loc[: first + k * INTERVAL_SECONDS + lengths[k] - 1]
        return max(0, round(float(upto.iloc[-1]))) if len(upto) else 0

    result: dict[str, Any] = {"workload": workload, "driver": driver, **shape}
    result["publishRate"] = rate("acked")
    result["publishErrorRate"] = rate("send_errors")
    result["consumeRate"] = rate("received")
    result["backlog"] = [backlog_at(k) for k in range(windows)]
    publish = [per_window.get(("publish", k)) for k in range(windows)]
    delay = [per_window.get(("publish_delay", k)) for k in range(windows)]
    e2e = [per_window.get(("e2e", k)) for k in range(windows)]
    result |= series("publishLatency", publish, 1 / 1000, whole=False)
    result |= series("publishDelayLatency", delay, 1.0, whole=True)
    result |= aggregated("aggregatedPublishLatency", overall.get("publish"), 1 / 1000, whole=False)
    result |= aggregated("aggregatedPublishDelayLatency", overall.get("publish_delay"), 1.0, whole=True)
    result["aggregatedPublishLatencyQuantiles"] = quantile_map(overall.get("publish"), 1 / 1000, whole=False)
    result["aggregatedPublishDelayLatencyQuantiles"] = quantile_map(overall.get("publish_delay"), 1.0, whole=True)
    result |= series("endToEndLatency", e2e, 1 / 1000, whole=False)
    result["aggregatedEndToEndLatencyQuantiles"] = quantile_map(overall.get("e2e"), 1 / 1000, whole=False)
    result |= aggregated("aggregatedEndToEndLatency", overall.get("e2e"), 1 / 1000, whole=False)
    return cast(OmbTestResult, result)


def workload_shape(run_dir: Path) -> dict[str, int]:
    """messageSize, topics, partitions, producersPerTopic and consumersPerTopic of the workload as it
    ended (run.json's final_workload), else as the run began (the bundle's workload.yaml)."""
    workload, source, prefix = _final_workload(run_dir), run_dir / "run.json", "final_workload."
    if workload is None:
        source, prefix = run_dir / "workload.yaml", ""
        try:
            workload = yamlcore.load(source.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise DimsterError(f"{source}: unreadable and run.json has no final_workload: {e}") from None
    shape = {}
    for field, key in WORKLOAD_KEYS.items():
        value = workload.get(key) if isinstance(workload, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            raise DimsterError(f"{source}: {prefix}{key} is {value!r}, {OMB_RESULT} needs an integer")
        shape[field] = value
    return shape


def _final_workload(run_dir: Path) -> dict | None:
    try:
        final = json.loads((run_dir / "run.json").read_text()).get("final_workload")
    except (OSError, ValueError, AttributeError):
        return None
    return final if isinstance(final, dict) else None


def _frame(table_dir: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """The readable parts of a metrics table, with `columns` (a column a part lacks is null)."""
    frames = []
    for path, footer in readable_parts(table_dir)[0].items():
        present = [c for c in columns if c in footer.schema.names]
        frames.append(pq.read_table(path, columns=present).to_pandas().reindex(columns=list(columns)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(columns))


def per_second(run_dir: Path) -> pd.DataFrame:
    """Per second of the run: `measured` (a report of the measured phase ended in it), the acked,
    send_errors and received of its measured reports, and the backlog at its end as the summary's
    throughput_per_second has it: acknowledged records not yet settled, summed over each topic's groups,
    counted from load start (warm-up included, as OMB's)."""
    rows = _frame(run_dir / "metrics" / "intervals", ("run_time_s", "phase", "role", "topic", "group", *COUNTS))
    rows[list(COUNTS)] = rows[list(COUNTS)].fillna(0).astype("int64")
    rows["second"] = rows["run_time_s"].astype(float).floordiv(1).astype("int64")
    settled = rows["received"].where(rows["role"] != "share_consumer", rows["accepted"] + rows["rejected"])
    rows["settled"] = settled.where(rows["role"] != "producer", 0)
    consumers = rows[rows["role"] != "producer"]
    topics = consumers["topic"].nunique() or 1
    groups_per_topic = (consumers["group"].nunique() or topics) / topics
    whole = rows.groupby("second")[["acked", "settled"]].sum()
    measured = rows[rows["phase"] == "measure"].groupby("second")[["acked", "send_errors", "received"]].sum()
    seconds = measured.reindex(whole.index, fill_value=0)
    seconds["measured"] = seconds.index.isin(measured.index)
    seconds["backlog"] = whole["acked"].cumsum() * groups_per_topic - whole["settled"].cumsum()
    return seconds.rename_axis("second").reset_index()


def histograms(run_dir: Path, first: int, windows: int) -> tuple[Histograms, Histograms]:
    """Merged histograms of the publish, publish delay and e2e latencies: per (metric, window), all
    that was observed in the window's measured reports; and per metric, the measured records, as
    summary.json's latency_ms (no warm-up prefix, phase not warm-up)."""
    columns = ("run_time_s", "phase", "metric", "bucket", "count", "hist_min", "hist_max")
    rows = _frame(run_dir / "metrics" / "histograms", columns)
    plain = rows["metric"].str.removeprefix(WARMUP_PREFIX)
    rows = rows.assign(plain=plain)[plain.isin(METRICS)]
    window = (rows["run_time_s"].astype(float).floordiv(1).astype("int64") - first) // INTERVAL_SECONDS
    in_window = rows.assign(window=window)[(rows["phase"] == "measure") & window.between(0, windows - 1)]
    per_window = _merged(in_window, ["plain", "window"])
    measured = rows[rows["metric"].isin(METRICS) & (rows["phase"] != "warmup")]
    overall = {key[0]: h for key, h in _merged(measured, ["plain"]).items()}
    return per_window, overall


def _merged(rows: pd.DataFrame, keys: list[str]) -> Histograms:
    """A Histogram per value of `keys` (a tuple), its buckets summed over the rows."""
    merged: Histograms = {}
    for key, part in rows.groupby(keys):
        summed = part.groupby("bucket")["count"].sum()
        counts = {int(b): int(n) for b, n in summed.items() if n}
        if counts:
            wire = (counts, sum(counts.values()), float(part["hist_min"].min()), float(part["hist_max"].max()))
            merged[key] = Histogram.from_wire(wire)
    return merged


def value_of(h: Histogram, bucket: int) -> float:
    """A bucket's value as Histogram.percentile gives it: its representative, within min and max."""
    return min(max(float(bucket_value(bucket)), h.min), h.max)


def mean(h: Histogram) -> float:
    """The buckets' mean (within the histogram's 1 %): a histogram keeps no sum."""
    counts, total, _, _ = h.to_wire()
    return sum(n * value_of(h, b) for b, n in counts.items()) / total


def _number(value: float, scale: float, whole: bool) -> float | int:
    return round(value * scale) if whole else value * scale


def figures(h: Histogram | None, scale: float, whole: bool) -> dict[str, float | int]:
    """Avg, the STATS percentiles and Max of a histogram, scaled; 0 for none, as HdrHistogram's."""
    if h is None or not h.total:
        zero = 0 if whole else 0.0
        return {"Avg": 0.0, **{name: zero for name, _ in STATS}, "Max": zero}
    return {
        "Avg": mean(h) * scale,
        **{name: _number(cast(float, h.percentile(q)), scale, whole) for name, q in STATS},
        "Max": _number(h.max, scale, whole),
    }


def series(prefix: str, per_window: list[Histogram | None], scale: float, whole: bool) -> dict[str, list]:
    """`prefix`Avg ... `prefix`Max: an entry per window."""
    rows = [figures(h, scale, whole) for h in per_window]
    return {prefix + name: [row[name] for row in rows] for name in rows[0]}


def aggregated(prefix: str, h: Histogram | None, scale: float, whole: bool) -> dict[str, float | int]:
    return {prefix + name: value for name, value in figures(h, scale, whole).items()}


def quantile_map(h: Histogram | None, scale: float, whole: bool) -> dict[float, float | int]:
    """Percentile level -> value, at the levels of HdrHistogram's PercentileIterator with TICKS ticks
    per half distance to 100 (steps of 0.5 up to 50, 0.25 up to 75, ...), as OMB writes its maps:
    each level reached by a bucket's cumulative count takes the bucket's value; the last bucket gives
    one level, then 100.0. Empty for no records."""
    if h is None:
        return {}
    counts, total, _, _ = h.to_wire()
    if not total:
        return {}
    out: dict[float, float | int] = {}
    level, seen, value = 0.0, 0, 0.0
    for bucket, n in sorted(counts.items()):
        if not n:
            continue
        seen += n
        value = value_of(h, bucket)
        while 100.0 * seen / total >= level:
            out[level] = _number(value, scale, whole)
            # Java's (long) (Math.log(100 / (100 - level)) / Math.log(2)): not log2, to step where it does
            level += 100.0 / (TICKS * 2 ** (int(math.log(100.0 / (100.0 - level)) / math.log(2)) + 1))
            if seen == total:
                break
    out[100.0] = _number(value, scale, whole)
    return out
