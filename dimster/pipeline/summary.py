"""The Spark summary of a run: reads `metrics/*` Parquet, writes `summary/summary.json` plus CSV and
Parquet tables. Percentiles come from merging histogram buckets, exact to the bucket bound (1%)."""

import json
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import yaml

from dimster import yamlcore
from dimster.diagnosis.timeline import diagnoses
from dimster.errors import DimsterError
from dimster.metrics.schema import OPTIONAL_TABLES, TABLES, WARMUP_PREFIX
from dimster.pipeline.broker_summary import summarize_brokers
from dimster.pipeline.client_tables import (
    client_ratios,
    late_wake_notes,
    overall_client_ratios,
    overall_worker_cpu,
    queued_request_notes,
    worker_cpu,
)
from dimster.pipeline.generator import generator_by_phase, generator_note, generator_reports, generator_summary
from dimster.pipeline.latency import latency_percentiles, measured_latencies
from dimster.pipeline.spark import GENERATED_CODE_ROWS, shown, spark_session, use_generated_code
from dimster.pipeline.spark_service import EMBEDDED
from dimster.pipeline.throughput import compression_ratio, overall_throughput, poll_counts, throughput_per_second
from dimster.results.bundle import is_run_folder, load_timeline
from dimster.results.metrics_parts import readable_parts
from dimster.verdict.judge import judge_summary


def read_run_info(path: Path) -> dict:
    """A JSON object file of a bundle (run.json, summary.json), or {} when it is missing or unreadable
    (a run killed while writing it)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def summarize(run_dir: Path, master: str, progress: Callable[[str], None] = lambda step: None) -> dict:
    """Write `summary/` for the run in `run_dir`; returns summary.json's content. `progress` is told
    each step as it begins (and each part of the Spark work as it ends, from Spark's threads)."""
    if not run_dir.is_dir() or not is_run_folder(run_dir):
        raise DimsterError(f"{run_dir} is not a dimster run folder (no run.json, no metrics/)")
    metrics = run_dir / "metrics"
    parts, notes = {}, []
    for table in TABLES:
        parts[table], skipped = readable_parts(metrics / table)
        notes += skipped
    present = [t for t in TABLES if parts[t]]
    missing = [t for t in TABLES if t not in present]
    run_info = read_run_info(run_dir / "run.json")
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
        "timeline": (timeline := load_timeline(run_dir)),
        # what limited the share groups while they fell behind: each limit's prediction and the rate measured
        "limits": [
            {k: d.get(k) for k in ("atSeconds", "event", "limit", "limitRate", "measured", "offered")}
            for d in diagnoses(timeline["events"])
        ],
        # seconds each group's consumers took to hold their assignments before load started
        "consumer_assignment_seconds": run_info.get("consumer_assignment_seconds"),
        "mode": run_info.get("mode"),  # what a test mode found: a limit, a drain, a correctness verdict
        # per group: acked = accepted + rejected + archived + unconsumed + in_doubt + lost
        "account": run_info.get("account"),
        "dead_letter_queue": run_info.get("deadLetterQueue"),  # topic, copyRecord, createTopic; None without
    }
    progress("starting Spark" if master == EMBEDDED else f"Spark at {shown(master)}")
    with spark_session(master, run_dir / "logs" / "spark.log") as spark:
        try:
            histogram_rows = sum(footer.num_rows for footer in parts["histograms"].values())
            use_generated_code(spark, histogram_rows >= GENERATED_CODE_ROWS)
            groups, topics = list(run_info.get("groups") or {}), list(run_info.get("topics") or [])
            tables = _spark_tables(
                spark, {t: parts[t] for t in present}, summary, groups, topics, progress, run_info.get("generator")
            )
        except Exception as e:  # a Spark failure: one line, the run folder stays as it was  # noqa: BLE001
            # read while Spark's JVM still runs: a Java exception's text comes from there
            raise DimsterError(f"Spark could not summarize {run_dir}: {str(e).strip().splitlines()[0]}") from None
    if "throughput_per_second" in tables:
        summary["share_outcomes"] = _share_outcomes(run_info)
    workload, aborted_by = final_workload(run_dir, run_info), run_info.get("aborted_by")
    judge_saturated = workload.get("saturatedPhases") == "judge"
    summary["verdict"] = judge_summary(workload.get("thresholds") or [], summary, aborted_by, judge_saturated)
    progress("writing the tables")
    for name, table in tables.items():
        table.attrs.clear()  # a Spark Connect result carries its plan's metrics there, which Parquet cannot hold
        table.to_csv(out / f"{name}.csv", index=False)
        table.to_parquet(out / f"{name}.parquet", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=_json_default))
    return summary


# Sections of a summary run at once on the one session: a run's data are small, and each Spark query's
# time is mostly its driver's planning and scheduling, which a second query overlaps.
SECTION_THREADS = 4
Section = tuple[dict, dict[str, pd.DataFrame], list[str]]  # (summary keys, tables, notes)


def _spark_tables(
    spark,
    parts: dict[str, dict[Path, pq.FileMetaData]],
    summary: dict,
    groups: list[str],
    topics: list[str],
    progress: Callable[[str], None],
    live_generator: dict | None = None,
) -> dict[str, pd.DataFrame]:
    """Run the Spark side: fills `summary` with overall numbers, returns the tables to write. The
    sections run concurrently; their results are merged in a fixed order, as if one after another."""
    frames = {t: spark.read.parquet(*map(str, paths)) for t, paths in parts.items()}
    sections = {  # the parts of most queries first, so that the last to begin is a short one
        "brokers": (("brokers",), lambda: _brokers(frames, groups)),
        "throughput": (("intervals",), lambda: _throughput(frames)),
        "latency": (("histograms",), lambda: _latency(frames)),
        "delivery counts": (("delivery_counts",), lambda: _delivery_counts(frames)),
        "client statistics": (("client_stats", "intervals"), lambda: _client_stats(frames)),
        "load generator": (("workers",), lambda: _generator(frames, live_generator)),
        "worker CPU": (("workers", "intervals"), lambda: _worker_cpu(frames)),
        "compression": (("intervals",), lambda: _compression(frames, topics)),
        "group lag": (("group_lag",), lambda: _group_lag(frames)),
    }
    runnable = {name: section for name, (needs, section) in sections.items() if all(t in frames for t in needs)}
    progress(f"{len(runnable)} parts of the metrics")
    pool = ThreadPoolExecutor(SECTION_THREADS, thread_name_prefix="summary")
    try:
        names = {pool.submit(section): name for name, section in runnable.items()}
        by_name = {}
        for count, future in enumerate(as_completed(names), start=1):  # a failing part fails the summary now
            by_name[names[future]] = future.result()
            progress(f"{count} of {len(runnable)} parts done ({names[future]})")
        results = [by_name[name] for name in runnable]
    finally:  # a failure or Ctrl-C: the parts not begun never begin; those running end with the session
        pool.shutdown(wait=False, cancel_futures=True)
    tables: dict[str, pd.DataFrame] = {}
    for values, section_tables, notes in results:
        summary.update(values)
        tables.update(section_tables)
        summary["notes"] += notes
    ratios = summary.get("client_stats") or {}
    if "brokers" in summary:
        summary["notes"] += queued_request_notes(ratios, summary["brokers"])
    if "compression" in summary:
        summary["compression"]["producer_compression_rate_avg"] = ratios.get("producer_compression_rate_avg")
    return tables


def _throughput(frames: dict) -> Section:
    from pyspark.sql import functions as F

    intervals = frames["intervals"].withColumn("second", F.floor("run_time_s").cast("long"))
    per_second = throughput_per_second(intervals).toPandas()
    values = {
        "backlog": _measured(per_second, "second", "backlog"),
        "throughput": overall_throughput(intervals),
        "polls": poll_counts(intervals),
    }
    return values, {"throughput_per_second": per_second}, []


def _latency(frames: dict) -> Section:
    from pyspark.sql import functions as F

    h = frames["histograms"].withColumn("second", F.floor("run_time_s").cast("long"))
    measured = measured_latencies(h)
    overall = latency_percentiles(measured, [])
    # Per second: whatever was observed in that second, warm-up records included.
    observed = h.withColumn("metric", F.regexp_replace("metric", f"^{WARMUP_PREFIX}", ""))
    e2e = measured.where(F.col("metric") == "e2e")
    per_second = latency_percentiles(observed, ["second"])
    tables = {
        "latency_per_second": per_second.sort_values(["metric", "second"], kind="stable", ignore_index=True),
        "latency_per_partition": latency_percentiles(e2e, ["topic", "partition"]),
        "latency_per_client": latency_percentiles(measured, ["client_id", "role"]),
    }
    return {"latency_ms": {r["metric"]: _row(r) for r in overall.to_dict("records")}}, tables, []


def _delivery_counts(frames: dict) -> Section:
    from pyspark.sql import functions as F

    counts = frames["delivery_counts"].groupBy("delivery_count").agg(F.sum("count").alias("records"))
    table = counts.orderBy("delivery_count").toPandas()
    values = {"delivery_counts": {int(r["delivery_count"]): int(r["records"]) for r in table.to_dict("records")}}
    return values, {"delivery_counts": table}, []


def _client_stats(frames: dict) -> Section:
    table = client_ratios(frames["client_stats"], frames["intervals"]).toPandas()
    return {"client_stats": overall_client_ratios(table)}, {"client_stats": table}, []


def _generator(frames: dict, live: dict | None) -> Section:
    """Whether dimster's load generator kept its schedule, per phase and worker (`live`: run.json's)."""
    reports = generator_reports(frames["workers"])
    table = generator_by_phase(reports, frames.get("histograms"))
    phases = generator_summary(table, live)
    return {"generator": phases}, {"generator": table}, generator_note(phases)


def _worker_cpu(frames: dict) -> Section:
    table = worker_cpu(frames["workers"], frames["intervals"]).toPandas()
    return {"worker_cpu": overall_worker_cpu(table)}, {"worker_cpu": table}, late_wake_notes(table)


def _brokers(frames: dict, groups: list[str]) -> Section:
    brokers, tables = summarize_brokers(frames["brokers"], groups)
    return {"brokers": brokers}, tables, []


def _compression(frames: dict, topics: list[str]) -> Section:
    """What compression achieved over the whole run (the Java producers' own rate is added from
    client_stats once every section is in)."""
    return {"compression": compression_ratio(frames["intervals"], frames.get("brokers"), topics)}, {}, []


def _group_lag(frames: dict) -> Section:
    from pyspark.sql import functions as F

    lag = frames["group_lag"].where(F.col("partition") == -1)
    table = lag.select("group", "run_time_s", "phase", "lag", "backlog").orderBy("group", "run_time_s").toPandas()
    values = {"broker_lag": _broker_lag(table), "broker_lag_total": _measured(table, "run_time_s", "lag")}
    return values, {"broker_lag": table}, []


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


def _measured(table: pd.DataFrame, at: str, column: str) -> dict | None:
    """A quantity summed over groups at each reading (`at`) of the measured phase: its max, its last
    value, and how many readings there were; None when the phase had none."""
    rows = table[(table["phase"] == "measure") & table[column].notna()]
    if rows.empty:
        return None
    per_reading = rows.groupby(at)[column].sum().sort_index()
    return {"max": int(per_reading.max()), "end": int(per_reading.iloc[-1]), "readings": len(per_reading)}


def final_workload(run_dir: Path, run_info: dict) -> dict:
    """The run's workload as it ended (run.json), else as the bundle's workload.yaml says (a crashed run
    recovered from its journal has no final workload); {} when neither is readable."""
    final = run_info.get("final_workload")
    if isinstance(final, dict):
        return final
    try:
        workload = yamlcore.load((run_dir / "workload.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return workload if isinstance(workload, dict) else {}


def _json_default(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def _row(record: dict) -> dict:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items() if k != "metric"}


# run.json's dead-letter totals (KIP-1191), None without a dead-letter queue: the run's records found in
# the dead-letter topic each once, those rejected or archived on their last delivery not found there,
# and the extra copies found
DEAD_LETTER_TOTALS = ("dead_lettered", "dead_letter_missing", "dead_letter_duplicates")
SHARE_OUTCOMES = (
    "accepted", "released", "rejected", "archived", "lost", "unconsumed", "duplicates", "renewed", "lock_timeouts",
    *DEAD_LETTER_TOTALS,
)  # fmt: skip


def _share_outcomes(run_info: dict) -> dict:
    totals = run_info.get("totals") or {}
    return {key: totals.get(key) for key in SHARE_OUTCOMES}
