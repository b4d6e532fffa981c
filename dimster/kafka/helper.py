"""dimster's Java helper (kafka/java/DimsterKafkaTool.java) as a service: one JVM per Kafka version and
state folder, started at first use and kept warm, answering on a Unix domain socket, one task per
connection. A JVM costs two to four seconds of CPU to start and to load Kafka's Admin client; a run
used to start two (the assignment watch and the lag watch) and `cluster up` two more. Now the first
use pays once and every later run, redeploy and `cluster up` of that state folder connects instead.

The helper is tracked by PID like a broker (helper.json beside its socket) and ends by itself once no
connection has been open for IDLE_SECONDS; `cluster down` ends it at once when nothing else uses it
(`stop_if_idle`). The cluster's security properties travel in the request over the socket, in a folder
only this user can enter: never on a command line, in the environment of a process, or in a file."""

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import struct
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from dimster.clock import Deadline
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.class_sharing import shared_classes
from dimster.kafka.distribution import HELPER_CLASS, KafkaDistribution, kafka_distribution
from dimster.kafka.security import ClientSecurity, java_security
from dimster.paths import state_dir
from dimster.processes import TrackedProcess, spawn, tail, wait_exited

IDLE_SECONDS = 600  # the helper exits once no connection has been open this long
START_SECONDS = 90  # a JVM on a busy 2-core host may take this long to load Kafka's classes and listen
JVM_OPTIONS = (
    "-Xmx256m",
    "-XX:TieredStopAtLevel=1",  # its work is I/O: C1's code is enough, and compiling costs less CPU
    "-XX:+UseSerialGC",
    "-Dlog4j2.level=ERROR",
)
SOCKET_PATH_MAX = 100  # a Unix socket's path must fit in sun_path (108 bytes)
DYING_SECONDS = 10  # a helper that dropped a task ends within this (a SIGKILLed JVM's threads ending)


class HelperDropped(ClusterError):
    """The helper closed a task's connection before it took the request."""

    def __init__(self, message: str, peer: psutil.Process | None):
        super().__init__(message)
        self.peer = peer


@dataclass
class HelperAnswer:
    """A finished task: its exit code and output lines, as a process's would be."""

    returncode: int
    stdout: str
    stderr: str


class HelperTask:
    """One task on its own connection: `lines()` yields the task's output until it ends (then
    `returncode` is set), `ask()` asks a watch for a reading at once, `close()` ends it."""

    def __init__(self, connection: socket.socket, peer: psutil.Process | None = None, deadline: Deadline | None = None):
        self._connection = connection
        self.peer = peer  # the process that took the task (None: not known)
        self.deadline = deadline  # by when the task must have ended (None: no limit, as a watch waits)
        self._reader = connection.makefile("r", encoding="utf-8", newline="\n")
        self.returncode: int | None = None
        self.errors: list[str] = []
        self.timed_out = False
        self.unanswered = False  # the helper went away before its #exit line

    def lines(self) -> Iterator[str]:
        try:
            for line in self._lines():
                line = line.rstrip("\n")
                if line.startswith("#exit "):
                    self.returncode = int(line[6:])
                    return
                if line.startswith("#stderr "):
                    self.errors.append(line[8:])
                else:
                    yield line
        except TimeoutError:
            self.timed_out = True
        except (OSError, ValueError):  # closed by this side, or the helper went away
            pass
        if self.returncode is None:
            self.unanswered = True
            self.errors.append("the Kafka helper ended the task without an answer")
            self.returncode = 1

    def _lines(self) -> Iterator[str]:
        """The connection's lines, each within what is left of the deadline (a TimeoutError once none is)."""
        while True:
            if self.deadline is not None:
                if self.deadline.passed():
                    raise TimeoutError
                self._connection.settimeout(self.deadline.left())
            line = self._reader.readline()
            if not line:
                return
            yield line

    def ask(self) -> None:
        self._connection.sendall(b"\n")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._connection.shutdown(socket.SHUT_RDWR)
        self._reader.close()
        self._connection.close()


class KafkaHelper:
    """The helper JVM of one Kafka version in this state folder."""

    def __init__(self, distribution: KafkaDistribution):
        self.distribution = distribution
        self.folder = helper_folder(distribution.version)
        self.classes = classes_stamp(distribution)  # read once: process() runs every 0.1 s while it starts

    @property
    def socket_path(self) -> Path:
        path = self.folder / "helper.sock"
        if len(str(path)) <= SOCKET_PATH_MAX:
            return path
        tag = hashlib.sha1(str(path).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"dimster-helper-{os.getuid()}-{tag}.sock"

    def _record(self) -> Path:
        return self.folder / "helper.json"

    def process(self, current: bool = True) -> TrackedProcess | None:
        """The running helper (with `current`, only one of today's classes), or None."""
        recorded = read_record(self._record())
        if recorded is None or (current and recorded[1] != self.classes):
            return None
        return recorded[0] if recorded[0].alive() else None

    def task(self, name: str, *args: str, security: ClientSecurity = None, timeout: float | None = None) -> HelperTask:
        """Start task `name` on the helper, started first when none runs; `timeout`: how long the task
        may take from then on, to its last line (None: no limit, as a watch waits)."""
        request = {"task": name, "args": list(args), "config": java_security(security)}
        connection = self._connect()
        deadline = None if timeout is None else Deadline(timeout)
        connection.settimeout(None if timeout is None else max(timeout, 1.0))  # the send's; each read its own
        peer = peer_process(connection)
        try:
            connection.sendall(json.dumps(request).encode() + b"\n")
        except OSError as e:  # it closed the connection first: a helper that is ending
            connection.close()
            raise HelperDropped(f"the Kafka helper did not take task '{name}': {e}", peer) from None
        return HelperTask(connection, peer, deadline)

    def run_task(self, name: str, *args: str, timeout: float = 120, security: ClientSecurity = None) -> HelperAnswer:
        """Task `name` to its end: its exit code and output. A helper that ended before it answered
        (another process's `cluster down` ended it just then, or a SIGKILL: a dying JVM's socket still
        takes connections while its threads end) is given DYING_SECONDS to end, and the task is asked
        again, once: of a fresh helper if it ended."""
        answer, dropped_by = self._run_once(name, args, timeout, security)
        if answer is None:
            if dropped_by is not None:
                wait_exited(dropped_by, DYING_SECONDS)
            answer, _ = self._run_once(name, args, timeout, security)
        return answer or HelperAnswer(1, "", "the Kafka helper ended the task without an answer, twice")

    def _run_once(
        self, name: str, args: tuple[str, ...], timeout: float, security: ClientSecurity
    ) -> tuple[HelperAnswer | None, psutil.Process | None]:
        """The task's answer; or None and the process that took it, when it ended without an answer."""
        try:
            task = self.task(name, *args, security=security, timeout=timeout)
        except HelperDropped as dropped:
            return None, dropped.peer
        try:
            lines = list(task.lines())
        finally:
            task.close()
        if task.timed_out:
            raise ClusterError(f"Kafka helper '{name}' did not finish within {timeout:g} s")
        if task.unanswered:
            return None, task.peer
        return HelperAnswer(task.returncode or 0, "\n".join(lines), "\n".join(task.errors)), None

    def _connect(self) -> socket.socket:
        connection = self._try_connect()
        if connection is not None:
            return connection
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.folder / "start.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one process starts it; the others connect to that one
            connection = self._try_connect()
            if connection is None:
                connection = self._start()
        return connection

    def _try_connect(self, current: bool = True) -> socket.socket | None:
        if self.process(current) is None:
            return None
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(str(self.socket_path))
            return connection
        except OSError:
            connection.close()
            return None

    def _start(self) -> socket.socket:
        if (stale := self.process(current=False)) is not None:  # not answering, or of other classes
            stale.stop(5)
        self.socket_path.unlink(missing_ok=True)
        log = self.folder / "helper.log"
        # its folder in a property: whose helper it is
        options = (*shared_classes(self.distribution), *JVM_OPTIONS, f"-Ddimster.helper={self.folder}")
        command = self.distribution.java(
            HELPER_CLASS, "serve", str(self.socket_path), str(IDLE_SECONDS * 1000), jvm_options=options
        )
        process = spawn(command, log)
        recorded = {"pid": process.pid, "started": process.started, "classes": self.classes}
        self._record().write_text(json.dumps(recorded))
        deadline = Deadline(START_SECONDS)
        while not deadline.passed():
            if not process.alive():
                said = " ".join(line.strip() for line in tail(log, 3)) or "no output"
                raise DimsterError(f"dimster's Kafka helper (Kafka {self.distribution.version}) exited: {said}")
            connection = self._try_connect()
            if connection is not None:
                return connection
            time.sleep(0.1)
        process.stop(5)
        raise DimsterError(f"dimster's Kafka helper did not answer within {START_SECONDS} s; its log: {log}")

    def stop_if_idle(self) -> None:
        """End the helper unless a task of another process is open on it; returns once it has ended."""
        process, connection = self.process(current=False), self._try_connect(current=False)
        if process is None or connection is None:
            return
        task = HelperTask(connection)
        try:
            connection.sendall(b'{"task": "stop-if-idle"}\n')
            list(task.lines())
        except OSError:
            pass
        finally:
            task.close()
        if task.returncode == 0:
            deadline = Deadline(10)
            while process.alive() and not deadline.passed():
                time.sleep(0.05)


def peer_process(connection: socket.socket) -> psutil.Process | None:
    """The process that listens on the other end of a Unix socket (SO_PEERCRED), None where unknown."""
    try:
        credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return psutil.Process(struct.unpack("3i", credentials)[0])
    except (OSError, psutil.Error):
        return None


def classes_stamp(distribution: KafkaDistribution) -> str:
    """The helper classes' stamp: a helper started from other sources is replaced."""
    return distribution.helper_key


def read_record(path: Path) -> tuple[TrackedProcess, str] | None:
    """A helper's helper.json: its process and its classes' stamp (None: none, or unreadable)."""
    try:
        recorded = json.loads(path.read_text())
        return TrackedProcess(int(recorded["pid"]), float(recorded["started"])), str(recorded.get("classes"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def helper_folder(version: str) -> Path:
    return state_dir() / "helpers" / version


def end_idle_helper(version: str) -> None:
    """`cluster down`: the helper of `version` ends unless another process's task is open on it."""
    if (helper_folder(version) / "helper.json").exists():
        KafkaHelper(kafka_distribution(version)).stop_if_idle()


def stop_helpers() -> None:
    """End every helper of this state folder, by PID (a test session's end)."""
    for record in (state_dir() / "helpers").glob("*/helper.json"):
        if (recorded := read_record(record)) is not None:
            with contextlib.suppress(OSError, ClusterError):
                recorded[0].stop(10)


def run_helper(
    distribution: KafkaDistribution, name: str, *args: str, timeout: float = 120, security: ClientSecurity = None
) -> HelperAnswer:
    """Task `name` of the helper of `distribution`'s version (see DimsterKafkaTool.java) to its end."""
    return KafkaHelper(distribution).run_task(name, *args, timeout=timeout, security=security)
