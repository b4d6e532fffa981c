"""`dimster monitor`: a real Prometheus (Debian's package) on loopback that scrapes an environment's
runs and brokers, with its configuration and data under the state folder. Each run announces its
endpoint in the environment's targets folder (Prometheus' file-based discovery) while it goes on."""

import json
import shutil
import socket
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from dimster.clock import Deadline
from dimster.environment import EnvironmentProfile
from dimster.errors import DimsterError
from dimster.paths import state_dir
from dimster.processes import TrackedProcess, spawn, tail

DEFAULT_PORT = 19090  # not Prometheus' 9090: Debian's package may run its own service there
INSTALL_HINT = "install Debian's prometheus package (apt-get install prometheus)"
RUN_SCRAPE_SECONDS = 1  # the run's endpoint changes every second
BROKER_SCRAPE_SECONDS = 5


def monitor_dir(env: str) -> Path:
    return state_dir() / "monitor" / env


def targets_dir(env: str) -> Path:
    """Where runs of `env` write their endpoint for Prometheus to find (file_sd JSON)."""
    return monitor_dir(env) / "targets"


def announce_run(env: str, run_id: str, address: str, labels: dict[str, str]) -> Path:
    """Write the run's endpoint as a file_sd target; the caller removes the file when the run ends."""
    path = targets_dir(env) / f"run-{run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps([{"targets": [address], "labels": labels}]))
    partial.replace(path)  # Prometheus never reads half a file
    return path


@dataclass
class MonitorState:
    pid: int
    started: float
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def scrape_config(profile: EnvironmentProfile) -> dict:
    brokers = [url.removeprefix("http://").removesuffix("/metrics") for url in profile.broker_metrics_urls.values()]
    jobs = [
        {
            "job_name": "dimster",
            "scrape_interval": f"{RUN_SCRAPE_SECONDS}s",
            "honor_labels": True,  # the run's own labels (environment, run, ...) stay as they are
            "file_sd_configs": [{"files": [str(targets_dir(profile.name) / "*.json")], "refresh_interval": "5s"}],
        }
    ]
    if brokers:
        jobs.append(
            {
                "job_name": "kafka-brokers",
                "scrape_interval": f"{BROKER_SCRAPE_SECONDS}s",
                "static_configs": [{"targets": brokers, "labels": {"environment": profile.name}}],
            }
        )
    return {"global": {"scrape_interval": f"{BROKER_SCRAPE_SECONDS}s"}, "scrape_configs": jobs}


class Monitor:
    def __init__(self, profile: EnvironmentProfile):
        self.profile = profile
        self.folder = monitor_dir(profile.name)
        self.state_file = self.folder / "state.json"
        self.log = self.folder / "prometheus.log"

    def state(self) -> MonitorState | None:
        """The running Prometheus of this environment, or None (a stale state file is removed)."""
        if not self.state_file.exists():
            return None
        try:
            state = MonitorState(**json.loads(self.state_file.read_text()))
        except (ValueError, TypeError):
            self.state_file.unlink()
            return None
        if not TrackedProcess(state.pid, state.started).alive():
            self.state_file.unlink()
            return None
        return state

    def up(self, port: int = DEFAULT_PORT, timeout: float = 60) -> MonitorState:
        if running := self.state():
            return running
        _check_port_free(port)
        prometheus = shutil.which("prometheus")
        if not prometheus:
            raise DimsterError(f"prometheus not found: {INSTALL_HINT}")
        targets_dir(self.profile.name).mkdir(parents=True, exist_ok=True)
        config = self.folder / "prometheus.yml"
        config.write_text(
            "# written by `dimster monitor up`: rewritten at every start\n"
            + yaml.safe_dump(scrape_config(self.profile), sort_keys=False)
        )
        command = [
            prometheus,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ]
        process = spawn(command, self.log)
        state = MonitorState(process.pid, process.started, port)
        try:
            self._wait_ready(process, state.url, timeout)
        except BaseException:  # not ready, or Ctrl-C while waiting: nothing is left running
            process.stop()
            raise
        self.state_file.write_text(json.dumps(asdict(state)))
        return state

    def _wait_ready(self, process: TrackedProcess, url: str, timeout: float) -> None:
        deadline = Deadline(timeout)
        while not _ready(url):
            if not process.alive() or deadline.passed():
                last = " | ".join(tail(self.log, 3)) or "no output"
                raise DimsterError(f"Prometheus did not get ready on {url}: {last} (log: {self.log})")
            time.sleep(0.3)

    def down(self) -> bool:
        state = self.state()
        if state is None:
            return False
        TrackedProcess(state.pid, state.started).stop()
        self.state_file.unlink(missing_ok=True)
        return True


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _check_port_free(port: int) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            raise DimsterError(f"port {port} on 127.0.0.1 is in use: choose another with --port") from None
