"""A summarized run folder as the reports read it: run.json, summary/ with its tables, the resolved
inputs and the timeline. Whatever is missing is listed rather than fatal, so a partial run still
gets a report."""

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from dimster import yamlcore
from dimster.errors import DimsterError
from dimster.results.bundle import is_run_folder, load_timeline

SUMMARY_TABLES = (
    "throughput_per_second",
    "latency_per_second",
    "latency_per_partition",
    "latency_per_client",
    "delivery_counts",
    "client_stats",
    "broker_requests",
    "broker_purgatory",
    "share_partition_in_flight",
    "broker_share_records",
    "broker_lag",
)
BROKER_TABLES = ("broker_requests", "broker_purgatory", "share_partition_in_flight")
INPUT_FILES = ("workload.yaml", "environment.yaml", "broker-config.yaml")


@dataclass
class RunData:
    path: Path
    run_info: dict[str, Any]
    summary: dict[str, Any]
    tables: dict[str, pd.DataFrame]
    inputs: dict[str, str]  # file name -> text, for the files that exist
    timeline: dict[str, list[dict[str, Any]]]
    missing: list[str] = field(default_factory=list)

    @property
    def workload(self) -> dict[str, Any]:
        """The final workload from run.json, else the resolved workload.yaml."""
        if isinstance(self.run_info.get("final_workload"), dict):
            return self.run_info["final_workload"]
        return parse_yaml(self.inputs.get("workload.yaml"))

    @property
    def lock_budget(self) -> int:
        """In-flight records a share-partition may hold (Kafka's default 2000 when not configured)."""
        config = self.run_info.get("broker_config") or parse_yaml(self.inputs.get("broker-config.yaml"))
        try:
            return int(config.get("group.share.partition.max.record.locks", 2000))
        except (TypeError, ValueError, AttributeError):
            return 2000

    @property
    def started(self) -> datetime | None:
        try:
            return datetime.fromisoformat(str(self.run_info["started"]))
        except (KeyError, ValueError):
            return None

    @property
    def name(self) -> str:
        return str(self.run_info.get("workload") or self.workload.get("name") or self.path.name)

    @property
    def status(self) -> str:
        return str(self.run_info.get("status") or self.summary.get("status") or "unknown")

    @property
    def load_started(self) -> float | None:
        """Epoch seconds at which load started: time 0 of every per-second table."""
        if self.run_info.get("load_started") is not None:
            return float(self.run_info["load_started"])
        for event in self.timeline.get("events", []):
            if event.get("event") == "load_started" and event.get("time") is not None:
                return float(event["time"])
        return None

    def run_time(self, epoch: Any) -> float | None:
        """An epoch time as seconds since load started (None when either is unknown)."""
        start = self.load_started
        if start is None or epoch is None:
            return None
        try:
            return float(epoch) - start
        except (TypeError, ValueError):
            return None

    def table(self, name: str) -> pd.DataFrame | None:
        frame = self.tables.get(name)
        return frame if frame is not None and not frame.empty else None


def load_run(run_dir: Path) -> RunData:
    """Everything a report shows about the run in `run_dir`; raises DimsterError if it is no run or has
    no summary yet."""
    if not run_dir.is_dir():
        raise DimsterError(f"{run_dir}: no such folder")
    if not is_run_folder(run_dir):
        raise DimsterError(f"{run_dir} is not a dimster run folder (no run.json, no metrics/)")
    summary_dir = run_dir / "summary"
    if not summary_dir.is_dir():
        raise DimsterError(f"{run_dir}: no summary yet; run `dimster summarize {run_dir}` first")
    missing: list[str] = []
    run_info = _read_json(run_dir / "run.json", "run.json", missing)
    summary = _read_json(summary_dir / "summary.json", "summary/summary.json", missing)
    share_group = _is_share_group(run_info, run_dir)
    brokers_scraped = (run_dir / "metrics" / "brokers").is_dir()  # not with brokerMetrics: false or external
    tables: dict[str, pd.DataFrame] = {}
    for name in SUMMARY_TABLES:
        frame = _read_table(summary_dir, name)
        lag_read = (run_dir / "metrics" / "group_lag").is_dir()
        # broker_share_records: not in the summaries of earlier versions
        expected = {"delivery_counts": share_group, "broker_lag": lag_read, "broker_share_records": False}.get(
            name, brokers_scraped if name in BROKER_TABLES else True
        )
        if frame is not None:
            tables[name] = frame
        elif expected:  # delivery counts exist for share groups only, broker tables for scraped brokers
            missing.append(f"summary/{name}.csv")
    inputs = {}
    for name in INPUT_FILES:
        if (run_dir / name).is_file():
            inputs[name] = (run_dir / name).read_text(errors="replace")
        else:
            missing.append(name)
    timeline = summary["timeline"] if isinstance(summary.get("timeline"), dict) else load_timeline(run_dir)
    return RunData(run_dir, run_info, summary, tables, inputs, timeline, missing)


def _read_json(path: Path, label: str, missing: list[str]) -> dict[str, Any]:
    if not path.is_file():
        missing.append(label)
        return {}
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        missing.append(f"{label} (unreadable)")
        return {}
    return data if isinstance(data, dict) else {}


def _read_table(summary_dir: Path, name: str) -> pd.DataFrame | None:
    csv, parquet = summary_dir / f"{name}.csv", summary_dir / f"{name}.parquet"
    try:
        if csv.is_file():
            return pd.read_csv(csv)
        if parquet.is_file():
            return pd.read_parquet(parquet)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, OSError, ValueError):
        return None
    return None


def _is_share_group(run_info: dict[str, Any], run_dir: Path) -> bool:
    workload = run_info.get("final_workload")
    if isinstance(workload, dict):
        return workload.get("consumerType") == "SHARE_GROUP"
    path = run_dir / "workload.yaml"
    return path.is_file() and "SHARE_GROUP" in path.read_text(errors="replace")


def parse_yaml(content: str | None) -> dict[str, Any]:
    """A YAML mapping, or {} when there is none or it does not parse."""
    try:
        loaded = yamlcore.load(content or "")
    except yaml.YAMLError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def natural_key(value: Any) -> tuple[str | int, ...]:
    """Sort key that orders c2 before c10 (text and numbers alternate, so keys always compare)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(value)))
