"""Whether dimster's load generator kept its schedule, per phase and worker, from the workers' reports:
a report is saturated by the rules of diagnosis/generator.py (threads waiting to run, CPU at the cores
it may use, steal time), and a phase is saturated when its generator was for
SATURATED_PHASE_SHARE of its time. The coordinator judges the same live, window by window (run.json's
`generator`), and a phase it judged keeps that judgement here; each worker's figures are its reports'."""

import pandas as pd

from dimster.diagnosis.generator import CPU_SHARE, STEAL_SHARE, WAIT_SHARE, phase_saturated
from dimster.metrics.schema import WARMUP_PREFIX
from dimster.pipeline.latency import latency_percentiles
from dimster.pipeline.throughput import number, with_covered


def generator_reports(workers):
    """A row per worker report: its phase, covered seconds, wait share, cores used, steal share and
    whether it was saturated."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    previous = F.lag("end_time").over(Window.partitionBy("worker").orderBy("end_time"))
    reports = with_covered(workers, ["worker"]).withColumn("span", F.col("end_time") - previous)
    reports = reports.withColumn("span", F.coalesce("span", "covered"))  # what its CPU and steal figures cover
    for column in ("steal_seconds", "cores"):  # bundles from before the worker reported them
        if column not in workers.columns:
            reports = reports.withColumn(column, F.lit(0))
    reports = reports.select(
        "worker", "end_time", "phase", "covered",
        F.least(F.try_divide(F.col("wake_lag_ms_sum") / 1000, "covered"), F.lit(1.0)).alias("wait_share"),
        F.try_divide("cpu_seconds", "span").alias("cpu_cores"),
        "cores",
        F.try_divide("steal_seconds", F.col("span") * F.col("cores")).alias("steal_share"),
    )  # fmt: skip
    saturated = (
        (F.coalesce("wait_share", F.lit(0.0)) >= WAIT_SHARE)
        | ((F.col("cores") > 0) & (F.coalesce("cpu_cores", F.lit(0.0)) >= CPU_SHARE * F.col("cores")))
        | (F.coalesce("steal_share", F.lit(0.0)) >= STEAL_SHARE)
    )  # publish delay alone is Kafka holding the producers back (diagnosis/generator.py)
    return reports.withColumn("saturated", saturated)


def generator_by_phase(reports, histograms) -> pd.DataFrame:
    """Per phase and worker: seconds, saturated seconds, mean wait share, cores and steal share, and
    the worst report's wait share and publish-delay p99 (its producers' p99 of that report)."""
    from pyspark.sql import functions as F

    def mean(column: str):
        return F.try_divide(F.sum(F.col(column) * F.col("covered")), F.sum("covered")).alias(column)

    table = (
        reports.groupBy("phase", "worker")
        .agg(
            F.sum("covered").alias("seconds"),
            F.sum(F.when(F.col("saturated"), F.col("covered")).otherwise(0.0)).alias("saturated_seconds"),
            mean("wait_share"),
            mean("cpu_cores"),
            F.max("cores").alias("cores"),
            mean("steal_share"),
            F.max("wait_share").alias("wait_share_max"),
        )
        .orderBy("phase", "worker")
        .toPandas()
    )
    if histograms is not None:  # a report's histogram rows carry its phase, as its worker row does
        delays = histograms.where(F.col("metric").isin("publish_delay", WARMUP_PREFIX + "publish_delay"))
        per_report = ["worker", "end_time", "phase"]
        p99 = latency_percentiles(delays.withColumn("metric", F.lit("publish_delay")), per_report)
        if not p99.empty:  # a worker with producers
            worst = p99.groupby(["phase", "worker"], as_index=False).agg(publish_delay_p99_ms_max=("p99", "max"))
            return table.merge(worst, on=["phase", "worker"], how="left")
    return table.assign(publish_delay_p99_ms_max=float("nan"))


def generator_summary(table: pd.DataFrame, live: dict | None = None) -> dict:
    """summary.json's `generator`: per phase its seconds, saturated seconds (of the worker saturated
    longest), whether it is a saturated phase, and each worker's figures (its own reports judged one by
    one). `live`: run.json's `generator`, the run's own judgement window by window: where it has a
    phase, the phase's three figures are its, so that the console, run.json, the summary and the
    verdicts say one thing (reports of a second judged alone flip on noise the windows average out)."""
    phases: dict[str, dict] = {}
    for phase, rows in table.groupby("phase"):
        seconds, saturated = float(rows["seconds"].max()), float(rows["saturated_seconds"].max())
        judged = (live or {}).get(str(phase))
        if isinstance(judged, dict) and judged.get("seconds"):
            seconds, saturated = float(judged["seconds"]), float(judged.get("saturated_seconds") or 0.0)
        workers = {
            str(int(r["worker"])): {k: number(v) for k, v in r.items() if k not in ("phase", "worker")}
            for r in rows.to_dict("records")
        }
        phases[str(phase)] = {
            "seconds": round(seconds, 2),
            "saturated_seconds": round(saturated, 2),
            "saturated": phase_saturated(saturated, seconds),
            "workers": workers,
        }
    return phases


def generator_note(phases: dict) -> list[str]:
    """A note when the measured phase's generator was saturated: its figures measure dimster too."""
    measured = phases.get("measure")
    if not measured or not measured["saturated"]:
        return []
    share = measured["saturated_seconds"] / measured["seconds"]
    return [
        f"the load generator was saturated for {share:.0%} of the measured phase: latencies and rates measure "
        "dimster's own wait as well as Kafka's, and verdicts on them are undecided (more workers, fewer "
        "clients a worker, librdkafka: docs/user-guide.md, 'A saturated load generator')"
    ]
