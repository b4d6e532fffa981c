"""A run's results folder: `results/<UTC time>-<workload name>/` with the resolved inputs, versions,
hardware, command line, the event and modification timelines, metrics and logs."""

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import confluent_kafka
import psutil
import yaml

from dimster import __version__
from dimster.errors import DimsterError
from dimster.kafka.distribution import java_executable, java_version_line

SECRET_KEY = re.compile(r"password|secret|jaas|token|credential|\.key$|private", re.IGNORECASE)


def redact(value: Any) -> Any:
    """A copy with the values of secret-looking keys replaced."""
    if isinstance(value, dict):
        return {k: ("***" if SECRET_KEY.search(str(k)) else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def java_version() -> str:
    try:
        return java_version_line(java_executable()) or "unknown"
    except (DimsterError, OSError, subprocess.TimeoutExpired):
        return "unknown"


def hardware() -> dict:
    model = ""
    if Path("/proc/cpuinfo").exists():
        match = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        model = match.group(1).strip() if match else ""
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_bytes": psutil.virtual_memory().total,
        "platform": platform.platform(),
        "hostname": platform.node(),
    }


class ResultsBundle:
    def __init__(self, root: Path, workload_name: str, started: datetime | None = None):
        started = started or datetime.now(UTC)
        self.started = started
        self.path = root / f"{started.strftime('%Y%m%dT%H%M%SZ')}-{workload_name}"
        suffix = 1
        while self.path.exists():
            suffix += 1
            self.path = root / f"{started.strftime('%Y%m%dT%H%M%SZ')}-{workload_name}-{suffix}"
        (self.path / "logs").mkdir(parents=True)
        (self.path / "metrics").mkdir()
        self.run_info: dict[str, Any] = {}

    def write_yaml(self, name: str, data: dict) -> None:
        (self.path / name).write_text(yaml.safe_dump(redact(data), sort_keys=False))

    def start(self, *, workload: dict, environment: dict, broker_config: dict, kafka_version: str, run_id: str) -> None:
        for timeline in ("events.jsonl", "modifications.jsonl"):
            (self.path / timeline).touch()
        self.write_yaml("workload.yaml", workload)
        self.write_yaml("environment.yaml", environment)
        self.write_yaml("broker-config.yaml", broker_config)
        self.run_info = {
            "run_id": run_id,
            "workload": workload.get("name"),
            "environment": environment.get("name"),
            "started": self.started.isoformat(),
            "command_line": redact_argv(sys.argv),
            "versions": {
                "dimster": __version__,
                "kafka": kafka_version,
                "confluent_kafka": confluent_kafka.version(),
                "librdkafka": confluent_kafka.libversion()[0],
                "java_clients": kafka_version,  # clientLibrary java runs the cluster version's clients
                "java": java_version(),
                "jpype": metadata.version("jpype1"),
                "python": platform.python_version(),
            },
            "hardware": hardware(),
            "status": "running",
        }
        self.save_run_info()

    def save_run_info(self) -> None:
        tmp = self.path / "run.json.tmp"
        tmp.write_text(json.dumps(self.run_info, indent=2, default=str))
        tmp.replace(self.path / "run.json")

    def event(self, kind: str, **details: Any) -> dict:
        """Append to events.jsonl: cluster changes, phases, worker failures."""
        return self._append("events.jsonl", {"time": time.time(), "event": kind, **redact(details)})

    def modification(self, **details: Any) -> dict:
        return self._append("modifications.jsonl", {"time": time.time(), **redact(details)})

    def _append(self, name: str, record: dict) -> dict:
        with open(self.path / name, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")
        return record

    def copy_broker_logs(self, log_files: dict[int, Path], max_bytes: int = 5_000_000) -> None:
        for node_id, path in log_files.items():
            if not path.exists():
                continue
            target = self.path / "logs" / f"broker-{node_id}.log"
            with open(path, "rb") as source, open(target, "wb") as out:
                source.seek(max(0, path.stat().st_size - max_bytes))
                shutil.copyfileobj(source, out)


def redact_argv(argv: list[str]) -> list[str]:
    return [re.sub(r"((?:password|secret|jaas|token)[^=]*=).*", r"\1***", a, flags=re.IGNORECASE) for a in argv]


def load_timeline(run_dir: Path) -> dict[str, list[dict]]:
    """events.jsonl and modifications.jsonl of a run folder (missing files are empty)."""
    timeline = {}
    for name in ("events", "modifications"):
        path = run_dir / f"{name}.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        timeline[name] = [json.loads(line) for line in lines if line.strip()]
    return timeline
