"""Processes dimster starts: launched detached, remembered by PID and start time, ended by PID."""

import contextlib
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil

from dimster.clock import Deadline
from dimster.errors import ClusterError

_DETACH = Path(__file__).with_name("detach.py")


_TICKS = os.sysconf("SC_CLK_TCK")
_WALL_CLOCK_RECORD = 1e9  # a `started` above this is a wall-clock time, as dimster recorded before 2026-11-30


@dataclass(frozen=True)
class TrackedProcess:
    """A process by its PID and start. `started` is seconds since boot (starttime in /proc/PID/stat):
    its wall-clock start would move whenever the host's clock is set or slewed, and a tracked process
    would then look gone to the next dimster command, a live run crashed and a broker stopped."""

    pid: int
    started: float

    @classmethod
    def of(cls, pid: int) -> "TrackedProcess":
        return cls(pid, _since_boot(pid) or 0.0)  # 0.0: already gone, as alive() says

    def _process(self) -> psutil.Process | None:
        """The process itself, or None when it is gone or the PID now belongs to another one."""
        try:
            process = psutil.Process(self.pid)
            if self.started > _WALL_CLOCK_RECORD:  # a record of an older dimster, e.g. a cluster it started
                return process if abs(process.create_time() - self.started) < 1.0 else None
        except psutil.Error:
            return None
        started = _since_boot(self.pid)
        return process if started is not None and abs(started - self.started) < 0.05 else None

    def alive(self) -> bool:
        process = self._process()
        try:
            return process is not None and process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def paused(self) -> bool:
        """Stopped by SIGSTOP (`dimster cluster pause`), so running no code until SIGCONT."""
        process = self._process()
        try:
            return process is not None and process.status() == psutil.STATUS_STOPPED
        except psutil.Error:
            return False

    def cpu_seconds(self) -> float | None:
        """CPU time the process has used (user and system), None when it is gone."""
        process = self._process()
        try:
            times = None if process is None else process.cpu_times()
        except psutil.Error:
            return None
        return None if times is None else times.user + times.system

    def listens_on(self, port: int) -> bool:
        """Whether this process itself listens on TCP `port` (not another process that took it)."""
        process = self._process()
        try:
            connections = [] if process is None else process.net_connections(kind="tcp")
        except psutil.Error:
            return False
        return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in connections)

    def send(self, signal_number: int) -> None:
        """Send a signal to this process, and only to it: not to a later one that reuses its PID."""
        process = self._process()
        if process is None:
            raise ClusterError(f"process {self.pid} is not running")
        try:
            process.send_signal(signal_number)
        except psutil.Error as e:
            raise ClusterError(f"could not signal process {self.pid}: {e}") from None

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL, as a crash; returns once the process is gone (or `timeout` seconds have passed)."""
        self.send(signal.SIGKILL)
        process = self._process()
        if process is not None:
            wait_exited(process, timeout)

    def _terminate(self) -> psutil.Process | None:
        """SIGTERM to the process, and SIGCONT, as a paused one acts on SIGTERM only then; the process,
        or None when it is gone."""
        process = self._process()
        if process is not None:
            with contextlib.suppress(psutil.Error):
                process.send_signal(signal.SIGTERM)
                process.send_signal(signal.SIGCONT)
        return process

    def stop_begin(self) -> None:
        """Send SIGTERM without waiting, so several processes can shut down together."""
        self._terminate()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL if it is still there after `timeout` seconds. A process that has
        exited counts as stopped even while it lingers as a zombie its parent has not reaped."""
        process = self._terminate()
        if process is None:
            return
        if wait_exited(process, timeout):
            return
        with contextlib.suppress(psutil.Error):
            process.kill()
        if not wait_exited(process, 10.0):
            raise ClusterError(f"process {self.pid} did not exit within {timeout + 10:.0f}s of SIGTERM and SIGKILL")


def _since_boot(pid: int) -> float | None:
    """When process `pid` started, in seconds since boot (starttime in /proc/PID/stat), None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[19]) / _TICKS  # field 22, counted after the name's ")"


def wait_exited(process: psutil.Process, timeout: float) -> bool:
    """Whether `process` exited (gone, or a zombie) within `timeout` seconds; reaps it if it is our child."""
    deadline = Deadline(timeout)
    while True:
        try:
            process.wait(0.1)  # reaps our own child; for any other process only polls
            return True
        except psutil.TimeoutExpired:
            pass
        except psutil.Error:
            return True
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            return True
        if deadline.passed():
            return False


def spawn(command: list[str], log_file: Path, env: dict[str, str] | None = None) -> TrackedProcess:
    """Start `command` detached: in its own session and, through the intermediate `detach.py`, no
    child of this process, so it outlives this CLI and any dimster process can stop it. Its output
    is appended to `log_file`."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        result = subprocess.run(  # -I: the intermediate imports the standard library only, never our modules
            [sys.executable, "-I", str(_DETACH), str(log_file), *command],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise ClusterError(f"could not start {Path(command[0]).name}: {e}") from None
    if result.returncode != 0 or not result.stdout.strip().isdigit():
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ClusterError(f"could not start {Path(command[0]).name}: {reason}")
    return TrackedProcess.of(int(result.stdout))


MAX_NICE = 19


def nice_this_thread(niceness: int = 10) -> None:
    """Lower the calling thread's priority by `niceness` (Linux nices a thread alone; 19 at most, as
    `nice` does), so that the process's other threads go first, also in a process already niced;
    where that is refused, nothing changes."""
    thread = threading.get_native_id()
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, thread, min(MAX_NICE, os.getpriority(os.PRIO_PROCESS, thread) + niceness))


def tail(path: Path, lines: int = 10) -> list[str]:
    if not path.exists():
        return []
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 64 * 1024))
        return f.read().decode(errors="replace").splitlines()[-lines:]
