"""The Spark summary of a campaign: one job over the metrics of every run it made, so that its points
compare on the same footing as a single run's summary (same measured phase, same percentile merging).
Per run: measured throughput, e2e and publish percentiles, run.json's totals and its run plan's
numbers; per point: their mean and spread over the repeats. Writes `campaign/summary/` in the
campaign folder: runs and points as CSV + Parquet, and summary.json."""

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from dimster.campaign.model import read_campaign_json
from dimster.errors import DimsterError
from dimster.metrics.schema import WAITING_NOTED
from dimster.pipeline.campaign_metrics import COSTS, LATENCIES, RUN_KEYS, Run, run_metrics
from dimster.pipeline.spark import spark_session
from dimster.pipeline.summary import DEAD_LETTER_TOTALS, read_run_info
from dimster.pipeline.throughput import THROUGHPUT_FIELDS
from dimster.verdict.campaign import campaign_verdict

SUMMARIZED = ("completed", "forced")
TOTALS = ("sent", "acked", "received", "lost", "unconsumed", "duplicates", *DEAD_LETTER_TOTALS)
GENERATOR = "generator_saturated_share"  # of the measured phase (run.json's `generator`)


def dimension_keys(campaign: dict[str, Any]) -> list[str]:
    """Every key the campaign varies, in the campaign file's order."""
    keys = [key for dimension in campaign.get("dimensions") or [] for key in dimension.get("keys") or []]
    if not keys:  # no dimensions listed: whatever the points set
        keys = [key for point in campaign.get("points") or [] for key in (point.get("values") or {})]
    return list(dict.fromkeys(keys))


def point_label(point: dict[str, Any]) -> str:
    values = point.get("values") or {}
    return str(point.get("label") or ", ".join(f"{key}={value}" for key, value in values.items()))


def mode_fields(run_info: dict[str, Any]) -> dict[str, float]:
    """The numeric and boolean top-level fields of run.json's `mode` as `mode_<field>` (booleans 0/1)."""
    mode = run_info.get("mode")
    if not isinstance(mode, dict):
        return {}
    return {
        f"mode_{key}": float(value)
        for key, value in mode.items()
        if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value))
    }


def summarize_campaign(campaign_dir: Path, master: str) -> dict:
    """Write `campaign/summary/` for the campaign in `campaign_dir`; returns summary.json's content."""
    campaign = read_campaign_json(campaign_dir)
    keys = dimension_keys(campaign)
    points = sorted(campaign.get("points") or [], key=lambda p: (_int(p.get("index")), _int(p.get("repeat"))))
    runs, notes = _runs_to_summarize(campaign_dir, campaign, points)
    metrics = pd.DataFrame(columns=RUN_KEYS)
    if any(_has(run, "intervals") or _has(run, "histograms") for run in runs):
        log = campaign_dir / "campaign" / "logs" / "spark.log"
        with spark_session(master, log, app_name="dimster-campaign") as spark:
            try:
                metrics = run_metrics(spark, runs)
            except Exception as e:  # a Spark failure: one line, the campaign folder stays as it was  # noqa: BLE001
                # read while Spark's JVM still runs: a Java exception's text comes from there
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise DimsterError(f"Spark could not summarize the campaign {campaign_dir}: {first}") from None
    elif not runs:
        notes.append("no run of the campaign completed: there is nothing to summarize")
    run_table = _run_table(points, runs, keys, metrics)
    notes += _late_wake_notes(run_table)
    point_table = _point_table(points, keys, run_table)
    out = campaign_dir / "campaign" / "summary"
    out.mkdir(parents=True, exist_ok=True)
    for name, table in (("runs", run_table), ("points", point_table)):
        table.to_csv(out / f"{name}.csv", index=False)
        _parquet_ready(table).to_parquet(out / f"{name}.parquet", index=False)
    summary = _clean(
        {
            "campaign": campaign.get("name", campaign_dir.name),
            "dimensions": keys,
            "metrics": _metric_columns(run_table),
            "points": _point_dicts(points, keys, point_table),
            "verdict": campaign_verdict(
                campaign.get("thresholds") or [], points, run_table, campaign.get("saturatedPhases") == "judge"
            ),
            "notes": notes,
        }
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


def _runs_to_summarize(campaign_dir: Path, campaign: dict, points: list[dict]) -> tuple[list[Run], list[str]]:
    """The runs with a bundle to summarize, and a note for every other run and every missing table."""
    several = _int(campaign.get("repeat"), 1) > 1 or any(_int(p.get("repeat"), 1) > 1 for p in points)
    runs, notes = [], []
    for point in points:
        where = f"point {point.get('index')}" + (f", repeat {point.get('repeat')}" if several else "")
        problem = _not_summarized(campaign_dir, point)
        if problem:
            notes.append(f"{where} ({point_label(point)}): {problem}")
            continue
        index, repeat = _int(point.get("index")), _int(point.get("repeat"), 1)
        run = Run(index, repeat, campaign_dir / point["bundle"], point["status"])
        for table in ("intervals", "histograms"):
            if not _has(run, table):
                notes.append(f"{where} ({point_label(point)}): {run.path.name}/metrics/{table} is missing")
        runs.append(run)
    return runs, notes


def _not_summarized(campaign_dir: Path, point: dict[str, Any]) -> str | None:
    """Why this run of a point is not summarized, or None when it is."""
    status = point.get("status")
    failure = point.get("failure")
    if status in SUMMARIZED:
        bundle = point.get("bundle")
        if not bundle:
            return f"{status}, but it names no bundle"
        if not (campaign_dir / bundle).is_dir():
            return f"{status}, but its bundle {bundle} is missing"
        return None
    if status in ("pending", None):
        return "not run"
    if status == "running":
        return "not finished (still running, or the campaign was cut off)"
    if status == "failed":
        return f"failed: {failure or _exit(point)}"
    if status == "interrupted":
        return f"interrupted: {failure}" if failure else "interrupted"
    return f"status {status}: not summarized"


def _exit(point: dict[str, Any]) -> str:
    code = point.get("exit_code")
    return "no reason given" if code is None else f"exit code {code}"


def _has(run: Run, table: str) -> bool:
    return any((run.path / "metrics" / table).glob("*.parquet"))


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _late_wake_notes(run_table: pd.DataFrame) -> list[str]:
    """Runs whose workers' threads waited long enough to run that their figures measure the workers
    (client_tables.late_wake_notes)."""
    if "worker_wake_wait_share" not in run_table:
        return []
    late = run_table[run_table.worker_wake_wait_share.astype(float) >= WAITING_NOTED]
    return [
        f"point {row['point']}, repeat {row['repeat']} ({row['label']}): a worker's threads waited to run "
        f"{row['worker_wake_wait_share']:.0%} of the measured phase: its figures include that wait, not only "
        "Kafka's; spread its clients over more workers or hosts"
        for row in late.to_dict("records")
    ]


def _run_table(points: list[dict], runs: list[Run], keys: list[str], metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per summarized run: point, repeat, dimension values, status, bundle, then the numbers."""
    by_run = {(_int(p.get("index")), _int(p.get("repeat"), 1)): p for p in points}
    rows = []
    for run in runs:
        point = by_run[(run.point, run.repeat)]
        info = read_run_info(run.path / "run.json")
        totals = info["totals"] if isinstance(info.get("totals"), dict) else {}
        row = {"point": run.point, "repeat": run.repeat, "label": point_label(point)}
        row.update({key: _cell((point.get("values") or {}).get(key)) for key in keys})
        row.update({"status": run.status, "bundle": run.path.name})
        row.update({total: _number(totals.get(total)) for total in TOTALS})
        measured = (info.get("generator") or {}).get("measure") or {}
        row[GENERATOR] = _number(measured.get("saturated_seconds")) / (_number(measured.get("seconds")) or math.nan)
        row.update(mode_fields(info))
        rows.append(row)
    modes = sorted({key for row in rows for key in row if key.startswith("mode_")})
    numbers = ["measured_seconds", *THROUGHPUT_FIELDS, *LATENCIES.values(), *COSTS]
    table = pd.DataFrame(
        rows, columns=["point", "repeat", "label", *keys, "status", "bundle", *TOTALS, GENERATOR, *modes]
    )
    metrics = metrics.reindex(columns=[*RUN_KEYS, *numbers]).astype({key: "int64" for key in RUN_KEYS})
    table = table.astype({key: "int64" for key in RUN_KEYS}).merge(metrics, on=RUN_KEYS, how="left")
    numbers += [*TOTALS, GENERATOR, *modes]
    table = table.reindex(columns=["point", "repeat", "label", *keys, "status", "bundle", *numbers])
    return table.astype({column: "float64" for column in numbers}).sort_values(RUN_KEYS, ignore_index=True)


def _metric_columns(run_table: pd.DataFrame) -> list[str]:
    start = list(run_table.columns).index("bundle") + 1
    return list(run_table.columns[start:])


def _point_table(points: list[dict], keys: list[str], run_table: pd.DataFrame) -> pd.DataFrame:
    """One row per point: dimension values, status, then per metric its mean, min, max and sample
    stddev (two or more repeats) over the point's summarized runs, and how many there were."""
    first: dict[int, dict] = {}
    statuses: dict[int, list[str]] = {}
    for point in points:
        index = _int(point.get("index"))
        first.setdefault(index, point)
        statuses.setdefault(index, []).append(str(point.get("status")))
    metrics = _metric_columns(run_table)
    grouped = run_table.groupby("point")
    rows = []
    for index, point in first.items():
        row: dict[str, Any] = {"point": index, "label": point_label(point)}
        row.update({key: _cell((point.get("values") or {}).get(key)) for key in keys})
        row["status"] = ", ".join(dict.fromkeys(statuses[index]))
        runs = grouped.get_group(index) if index in grouped.groups else run_table.iloc[0:0]
        for metric in metrics:
            values = runs[metric].dropna()
            row[f"{metric}_mean"] = values.mean() if len(values) else math.nan
            row[f"{metric}_min"] = values.min() if len(values) else math.nan
            row[f"{metric}_max"] = values.max() if len(values) else math.nan
            row[f"{metric}_stddev"] = values.std(ddof=1) if len(values) >= 2 else math.nan
        row["repeats"] = len(runs)
        rows.append(row)
    columns = ["point", "label", *keys, "status"]
    columns += [f"{m}_{s}" for m in metrics for s in ("mean", "min", "max", "stddev")] + ["repeats"]
    return pd.DataFrame(rows, columns=columns)


def _point_dicts(points: list[dict], keys: list[str], point_table: pd.DataFrame) -> list[dict]:
    runs: dict[int, list[dict]] = {}
    for point in points:
        runs.setdefault(_int(point.get("index")), []).append(
            {"repeat": point.get("repeat"), "status": point.get("status"), "bundle": point.get("bundle")}
        )
    values = {_int(p.get("index")): p.get("values") or {} for p in points}
    stats = [c.removesuffix("_mean") for c in point_table.columns if c.endswith("_mean")]
    found = []
    for row in point_table.to_dict("records"):
        found.append(
            {
                "point": row["point"],
                "label": row["label"],
                "values": {key: values[row["point"]].get(key) for key in keys},
                "status": row["status"],
                "repeats": row["repeats"],
                "runs": runs[row["point"]],
                "metrics": {
                    metric: {s: row[f"{metric}_{s}"] for s in ("mean", "min", "max", "stddev")} for metric in stats
                },
            }
        )
    return found


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def _cell(value: Any) -> Any:
    """A dimension value as a table cell: lists and mappings as JSON text."""
    return json.dumps(value) if isinstance(value, list | dict) else value


def _parquet_ready(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with every column of mixed value types (a dimension of numbers and words) as text."""
    table = table.copy()
    table.attrs.clear()  # a Spark Connect result carries its plan's metrics there, which Parquet cannot hold
    for column in table.columns:
        if table[column].dtype == object:
            kinds = {type(v) for v in table[column] if v is not None and not (isinstance(v, float) and math.isnan(v))}
            if len(kinds) > 1:
                table[column] = [None if v is None else str(v) for v in table[column]]
    return table


def _clean(value: Any) -> Any:
    """JSON-ready: NaN as null, numpy scalars as Python ones."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
