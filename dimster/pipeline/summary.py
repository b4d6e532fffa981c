"""The Spark summary of a run: reads `metrics/*` Parquet, writes `summary/summary.json` plus CSV and
Parquet tables. Percentiles come from merging histogram buckets, exact to the bucket bound (1%)."""

import json
import math
from pathlib import Path

import pandas as pd
import yaml

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
from dimster.pipeline.spark import spark_session
from dimster.pipeline.throughput import overall_compression, overall_throughput, poll_counts, throughput_per_second
from dimster.results.bundle import is_run_folder, load_timeline
from dimster.results.metrics_writer import readable_parts
from dimster.verdict.judge import judge_summary


def read_run_info(path: Path) -> dict:
    """A JSON object file of a bundle (run.json, summary.json), or {} when it is missing or unreadable
    (a run killed while writing it)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def summarize(run_dir: Path, master: str) -> dict:
    """Write `summary/` for the run in `run_dir`; returns summary.json's content."""
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
    with spark_session(master, run_dir / "logs" / "spark.log") as spark:
        try:
            groups, topics = list(run_info.get("groups") or {}), list(run_info.get("topics") or [])
            tables = _spark_tables(spark, {t: parts[t] for t in present}, summary, groups, topics)
        except Exception as e:  # a Spark failure: one line, the run folder stays as it was
            # read while Spark's JVM still runs: a Java exception's text comes from there
            raise DimsterError(f"Spark could not summarize {run_dir}: {str(e).strip().splitlines()[0]}") from None
    if "throughput_per_second" in tables:
        summary["share_outcomes"] = _share_outcomes(run_info)
    workload, aborted_by = final_workload(run_dir, run_info), run_info.get("aborted_by")
    judge_saturated = workload.get("saturatedPhases") == "judge"
    summary["verdict"] = judge_summary(workload.get("thresholds") or [], summary, aborted_by, judge_saturated)
    for name, table in tables.items():
        table.attrs.clear()  # a Spark Connect result carries its plan's metrics there, which Parquet cannot hold
        table.to_csv(out / f"{name}.csv", index=False)
        table.to_parquet(out / f"{name}.parquet", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=_json_default))
    return summary


def _spark_tables(
    spark, parts: dict[str, list[Path]], summary: dict, groups: list[str], topics: list[str]
) -> dict[str, pd.DataFrame]:
    """Run the Spark side: fills `summary` with overall numbers, returns the tables to write."""
    from pyspark.sql import functions as F

    frames = {t: spark.read.parquet(*map(str, paths)) for t, paths in parts.items()}
    tables: dict[str, pd.DataFrame] = {}
    if "intervals" in frames:
        intervals = frames["intervals"].withColumn("second", F.floor("run_time_s").cast("long"))
        tables["throughput_per_second"] = throughput_per_second(intervals).toPandas()
        summary["backlog"] = _measured(tables["throughput_per_second"], "second", "backlog")
        summary["throughput"] = overall_throughput(intervals)
        summary["polls"] = poll_counts(intervals)
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
    if "workers" in frames:  # whether dimster's load generator kept its schedule, per phase and worker
        reports = generator_reports(frames["workers"], frames.get("histograms"))
        tables["generator"] = generator_by_phase(reports).toPandas()
        summary["generator"] = generator_summary(tables["generator"])
        summary["notes"] += generator_note(summary["generator"])
    if "workers" in frames and "intervals" in frames:
        tables["worker_cpu"] = worker_cpu(frames["workers"], frames["intervals"]).toPandas()
        summary["worker_cpu"] = overall_worker_cpu(tables["worker_cpu"])
        summary["notes"] += late_wake_notes(tables["worker_cpu"])
    if "brokers" in frames:
        summary["brokers"], broker_tables = summarize_brokers(frames["brokers"], groups)
        tables.update(broker_tables)
        summary["notes"] += queued_request_notes(summary.get("client_stats") or {}, summary["brokers"])
    if "intervals" in frames:
        summary["compression"] = overall_compression(frames, topics, summary.get("client_stats") or {})
    if "group_lag" in frames:
        lag = frames["group_lag"].where(F.col("partition") == -1)
        totals = lag.select("group", "run_time_s", "phase", "lag", "backlog")
        tables["broker_lag"] = totals.orderBy("group", "run_time_s").toPandas()
        summary["broker_lag"] = _broker_lag(tables["broker_lag"])
        summary["broker_lag_total"] = _measured(tables["broker_lag"], "run_time_s", "lag")
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
        workload = yaml.safe_load((run_dir / "workload.yaml").read_text())
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
