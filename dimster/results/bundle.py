"""A run's results folder: `results/<UTC time>-<workload name>/` with the resolved inputs, versions,
hardware, command line, the event and modification timelines, metrics and logs."""

import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import confluent_kafka
import psutil

from dimster import __version__, yamlcore
from dimster.errors import DimsterError
from dimster.kafka.distribution import java_executable, java_version_line
from dimster.processes import TrackedProcess
from dimster.results.records import Hardware, RunJson, write_run_json
from dimster.results.redaction import Redactor, redact, redact_argv

__all__ = ["ResultsBundle", "load_timeline", "redact", "redact_argv"]

CRASHED_OUTPUT = "coordinator-output.log"  # a crashed detached run's console, in the bundle's logs/
ERRORS_LOG = "coordinator-errors.log"  # the tracebacks of dimster's own bugs that a run met (internal_error)


def java_version() -> str:
    try:
        return java_version_line(java_executable()) or "unknown"
    except (DimsterError, OSError, subprocess.TimeoutExpired):
        return "unknown"


def hardware() -> Hardware:
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


def mark_crashed(run_dir: Path, pid: int, console: Path | None = None) -> bool:
    """A run whose coordinator died without recording its end (killed, out of memory): its run.json
    says `crashed`. False when run.json is not there or already records an end. A detached run's
    `console` (its stdout and stderr, where a C library's last words go) is copied to the bundle's
    logs/coordinator-output.log, also when `dimster summarize` marked the crash first: the
    environment's next detached run writes that file anew."""
    path = run_dir / "run.json"
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    status = info.get("status") if isinstance(info, dict) else None
    kept = run_dir / "logs" / CRASHED_OUTPUT
    if console is not None and status in ("running", "crashed") and not kept.exists():
        with contextlib.suppress(OSError):  # gone or unreadable: run.json says what is known
            shutil.copyfile(console, kept)
    if status != "running":
        return False
    info.update(status="crashed", failure=f"the coordinator (pid {pid}) ended without recording the run's end")
    write_run_json(run_dir, info)
    return True


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
        self.run_info: RunJson = cast(RunJson, {})  # run.json, typed: start() gives its first keys
        self.redactor = Redactor()  # every write goes through it: secrets never reach the bundle

    def write_yaml(self, name: str, data: dict) -> None:
        (self.path / name).write_text(yamlcore.dump(self.redactor.redact(data)))

    def start(
        self,
        *,
        workload: dict,
        environment: dict,
        broker_config: dict,
        kafka_version: str,
        run_id: str,
        java_clients: dict[str, str] | None = None,
        brokers: list[int] | None = None,
    ) -> None:
        """`brokers`: the ids of the brokers the cluster registers as the run starts; `java_clients`:
        the kafka-clients version of each role that runs Java clients."""
        for timeline in ("events.jsonl", "modifications.jsonl", "console.log"):
            (self.path / timeline).touch()
        for data in (workload, environment, broker_config):  # all secrets known before the first write
            self.redactor.learn(data)
        self.write_yaml("workload.yaml", workload)
        self.write_yaml("environment.yaml", environment)
        self.write_yaml("broker-config.yaml", broker_config)
        record: RunJson = {  # run.json as the run starts (records.py has what the run adds)
            "run_id": run_id,
            "workload": workload.get("name"),
            "environment": environment.get("name"),
            "started": self.started.isoformat(),
            "command_line": self.redactor.argv(sys.argv),
            "versions": {
                "dimster": __version__,
                "kafka": kafka_version,
                "confluent_kafka": confluent_kafka.version(),  # type: ignore[typeddict-item]  # a str (stubs: a tuple)
                "librdkafka": confluent_kafka.libversion()[0],
                "java_clients": java_clients or {},
                "java": java_version(),
                "jpype": metadata.version("jpype1"),
                "python": platform.python_version(),
            },
            "hardware": hardware(),
            "brokers": brokers or [],
            "status": "running",
            # who records the run's end: a run whose coordinator is gone without doing so crashed
            "coordinator_process": {"pid": os.getpid(), "started": TrackedProcess.of(os.getpid()).started},
        }
        self.run_info = record
        self.save_run_info()

    def save_run_info(self) -> None:
        """Write run.json (redacted as a whole: `final_workload` and whatever else the run adds)."""
        write_run_json(self.path, self.redactor.redact(self.run_info))

    def event(self, kind: str, **details: Any) -> dict:
        """Append to events.jsonl: cluster changes, phases, worker failures. Returns the redacted record."""
        return self._append("events.jsonl", {"time": time.time(), "event": kind, **details})

    def modification(self, **details: Any) -> dict:
        """Append a live change ({key, old, new, ...}) to modifications.jsonl. Returns the redacted record."""
        return self._append("modifications.jsonl", {"time": time.time(), **details})

    def console(self, line: str) -> str:
        """Append a console line to console.log; returns it redacted, as it should be printed."""
        line = self.redactor.text(line)
        with open(self.path / "console.log", "a") as f:
            f.write(line + "\n")
        return line

    def redact_text(self, text: str) -> str:
        """Any text with the run's secrets masked (the values seen so far, and `secret.key=value`)."""
        return self.redactor.text(text)

    def _append(self, name: str, record: dict) -> dict:
        record = self.redactor.redact(record)
        with open(self.path / name, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")
        return record

    def internal_error(self, where: str, error: BaseException) -> str:
        """A bug of dimster's met by a thread that must go on (a control request, a fault, a redeploy) or
        by the run's end: its traceback, masked, appended to logs/coordinator-errors.log; returns the
        one line that names it there."""
        trace = "".join(traceback.format_exception(error))
        (self.path / "logs").mkdir(exist_ok=True)
        with open(self.path / "logs" / ERRORS_LOG, "a") as f:
            f.write(f"== {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC, {where}\n{self.redactor.text(trace)}\n")
        return self.redactor.text(f"internal error: {type(error).__name__}: {error} (traceback in logs/{ERRORS_LOG})")

    @property
    def fatal_log(self) -> Path:
        """Where a coordinator that dies of a fatal signal leaves its threads' stacks (loop/failures.py)."""
        return self.path / "logs" / "coordinator-fatal.log"

    def copy_broker_logs(self, log_files: dict[int, Path], max_bytes: int = 5_000_000) -> None:
        for node_id, path in log_files.items():
            if not path.exists():
                continue
            target = self.path / "logs" / f"broker-{node_id}.log"
            with open(path, "rb") as source, open(target, "wb") as out:
                source.seek(max(0, path.stat().st_size - max_bytes))
                shutil.copyfileobj(source, out)
            self.redactor.scrub_file(target)

    def scrub_logs(self) -> None:
        """Mask the run's secrets in the logs others wrote (workers, Java clients, brokers) and in
        console.log: the last pass of a run over its bundle."""
        for path in [self.path / "console.log", *sorted((self.path / "logs").glob("*"))]:
            self.redactor.scrub_file(path)


def is_run_folder(path: Path) -> bool:
    """A run's bundle, also one cut short: its run.json or its metrics."""
    return (path / "run.json").is_file() or (path / "metrics").is_dir()


def load_timeline(run_dir: Path) -> dict[str, list[dict]]:
    """events.jsonl and modifications.jsonl of a run folder (missing files are empty)."""
    timeline = {}
    for name in ("events", "modifications"):
        path = run_dir / f"{name}.jsonl"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        timeline[name] = [redact(record) for record in map(_json_record, lines) if record is not None]
    return timeline


def _json_record(line: str) -> dict | None:
    """A timeline line as a record; None for a blank or broken one (a run killed while writing)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
