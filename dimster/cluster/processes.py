"""Processes dimster starts: launched detached, remembered by PID and start time, ended by PID."""

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class TrackedProcess:
    pid: int
    started: float  # psutil create_time: tells our process apart from a later one with a reused PID

    def _process(self) -> psutil.Process | None:
        """The process itself, or None when it is gone or the PID now belongs to another one."""
        try:
            process = psutil.Process(self.pid)
            return process if abs(process.create_time() - self.started) < 1.0 else None
        except psutil.Error:
            return None

    def alive(self) -> bool:
        process = self._process()
        try:
            return process is not None and process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def stop_begin(self) -> None:
        """Send SIGTERM without waiting, so several processes can shut down together."""
        if self.alive():
            with contextlib.suppress(psutil.Error):
                psutil.Process(self.pid).send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL if it is still there after `timeout` seconds; reaps our own children."""
        process = self._process()
        if process is None:
            return
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                process.send_signal(signal.SIGTERM)
            process.wait(timeout)
        except psutil.TimeoutExpired:
            process.kill()
            process.wait(10)
        except psutil.Error:
            pass


def spawn(command: list[str], log_file: Path, env: dict[str, str] | None = None) -> TrackedProcess:
    """Start `command` in its own session (it outlives this CLI), output appended to `log_file`."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    for _ in range(50):  # create_time is readable as soon as the kernel has the process
        try:
            return TrackedProcess(process.pid, psutil.Process(process.pid).create_time())
        except psutil.Error:
            time.sleep(0.01)
    return TrackedProcess(process.pid, 0.0)


def tail(path: Path, lines: int = 10) -> list[str]:
    if not path.exists():
        return []
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 64 * 1024))
        return f.read().decode(errors="replace").splitlines()[-lines:]
