"""dimster's own Spark, kept warm: a Spark Connect server (PySpark's own jars) on loopback, one per
state folder, reused by every later run, campaign point and `dimster summarize`. A Spark JVM of its own
costs a summary 15-30 s of CPU to start and to compile Spark's code; on a warm server a summary pays
only its queries.

A run that will summarize on it starts it once its cluster is up and its workers started (start_ahead:
in the background, niced), then has it summarize a small made-up run (warm_up.py), so that its own
summary finds Spark's code loaded and compiled; otherwise the first summary starts it.
Not `cluster up`: a user who runs with --no-summary, or against an external cluster only, never pays
for a JVM that would summarize nothing. It is tracked by PID like a broker (spark.json beside its
log, spark.log); `cluster down` of the state folder's last cluster ends it unless a summary is using
it, and `dimster spark stop` ends it once no summary is. A summary's session settings (time zone,
shuffle partitions) are its own (spark.py's SESSION_CONFS). Its heap is bounded by
DIMSTER_SPARK_DRIVER_MEMORY (1g); a summary's data are a few MB of Parquet."""

import contextlib
import fcntl
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dimster.clock import Deadline
from dimster.errors import DimsterError
from dimster.paths import state_dir
from dimster.processes import TrackedProcess, spawn, tail

EMBEDDED = "embedded"  # the --spark-master value of this server, dimster's default
START_SECONDS = 120  # a JVM on a busy 2-core host may take this long to load Spark and listen
STALL_SECONDS = 60.0  # a server that ran no code this long while a summary waited on it is hung
WATCH_PERIOD = 1.0  # seconds between two looks at the server's CPU time
START_TRIES = 3  # free ports picked in turn: another process may take one before the server binds it
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SERVER_MASTER = "local[*]"
# C1 alone, as for a summary's own JVM (spark.py): the server's queries are many and small, and C2's
# compiling cost a warm summary a fifth more CPU than it saved; the code cache keeps its 240 MB.
SERVER_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
# a server started while a run loads yields the cores to the run's brokers and workers (a weight of
# about a tenth of theirs), and keeps that priority: on an idle host it runs as fast
AHEAD_NICE = 10
_SPAWNING = threading.Lock()  # held from a server's spawn to its record in spark.json, and around _warm_ups
_warm_ups: list[TrackedProcess] = []  # this process's warm-up summaries (warm_up.py), ended by settle_ahead
_settled = threading.Event()  # set by settle_ahead: no warm-up starts after it


@dataclass(frozen=True)
class RunningServer:
    process: TrackedProcess
    port: int
    version: str  # PySpark's: a server of another version is replaced

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


def pyspark_version() -> str:
    from pyspark.version import __version__

    return __version__


class SparkService:
    """The warm Spark Connect server of this state folder."""

    def __init__(self) -> None:
        self.folder = state_dir() / "spark"
        self.log = self.folder / "spark.log"
        self._record = self.folder / "spark.json"

    def running(self) -> RunningServer | None:
        """The server this state folder started, if it is still alive (of any version)."""
        try:
            recorded = json.loads(self._record.read_text())
            process = TrackedProcess(int(recorded["pid"]), float(recorded["started"]))
            server = RunningServer(process, int(recorded["port"]), str(recorded["version"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return server if process.alive() else None

    @contextlib.contextmanager
    def in_use(self) -> Iterator["StallWatch"]:
        """The server (its `url`), started first when none of this PySpark's listens, and watched
        while the block runs; held meanwhile (`held`)."""
        with self.held(), StallWatch(self._server()) as watch:
            yield watch

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """While the block runs, `stop` waits for it to end and `stop(if_idle=True)` ends nothing."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.folder / "use.lock", "w") as use:
            fcntl.flock(use, fcntl.LOCK_SH)
            yield

    def start_ahead(self) -> threading.Thread | None:
        """Start the server in the background, at a low priority (AHEAD_NICE), while a run loads: its
        summary then finds it warm rather than paying its start. None when one runs already; a start
        that fails is left to the summary, which tries again and says why."""
        if self.running() is not None:
            return None
        _settled.clear()

        def start() -> None:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            with contextlib.suppress(DimsterError):
                self._warm_up(self._server(nice=AHEAD_NICE))

        thread = threading.Thread(target=start, name="spark-ahead", daemon=True)
        thread.start()
        return thread

    def _warm_up(self, server: RunningServer) -> None:
        """A summary of a made-up run on the new server (warm_up.py), in a process of its own at the
        server's priority, so that the run's own summary finds Spark's code compiled. One that cannot
        start (a ClusterError, e.g. no `nice` here) leaves the summary to pay its queries."""
        command = ["nice", "-n", str(AHEAD_NICE), sys.executable, "-m", "dimster.pipeline.warm_up", server.url]
        with _SPAWNING:
            if not _settled.is_set():
                (self.folder / "warm-up.log").unlink(missing_ok=True)
                _warm_ups.append(spawn(command, self.folder / "warm-up.log"))

    @staticmethod
    def settle_ahead() -> None:
        """Before this process summarizes or ends: a server a start_ahead thread is spawning is recorded
        first (the thread, a daemon, stops with the process; the server it started is tracked by its
        PID), and a warm-up summary still going is ended (the run's own summary needs the server more)."""
        with _SPAWNING:
            _settled.set()
            while _warm_ups:
                _warm_ups.pop().stop(10)

    def _server(self, nice: int = 0) -> RunningServer:
        if (server := self.running()) is not None and _usable(server):
            return server
        with open(self.folder / "start.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one process starts it; the others use that one
            if (server := self.running()) is not None and _usable(server):
                return server
            if server is not None:  # not listening, or of another PySpark
                server.process.stop(15)
            return self._start(nice)

    def _start(self, nice: int = 0) -> RunningServer:
        """A new server on a free port; another port when another process took the one picked
        before the server could bind it."""
        for _ in range(START_TRIES):
            server = self._start_on(_free_port(), nice)
            if server is not None:
                return server
        taken = f"the {START_TRIES} free ports it was given were taken before it bound them"
        raise DimsterError(f"dimster's Spark server did not start: {taken}; its log: {self.log}")

    def _start_on(self, port: int, nice: int = 0) -> RunningServer | None:
        """The server on `port` (at `nice`); None when another process took that port first."""
        spark_home = _spark_home()
        options = f"-Ddimster.spark={self.folder} -Dlog4j2.configurationFile={_log4j()}"
        options += " " + os.environ.get("DIMSTER_SPARK_SERVER_JAVA_OPTS", SERVER_JAVA_OPTS)
        command = [
            str(spark_home / "bin" / "spark-submit"),
            *("--class", SERVER_CLASS, "--name", "dimster-spark", "--master", SERVER_MASTER),
            *("--driver-memory", os.environ.get("DIMSTER_SPARK_DRIVER_MEMORY", "1g")),
            *("--driver-java-options", options),
            *_confs(port),
            "spark-internal",
        ]
        if nice:  # nice execs spark-submit, which execs the JVM: the PID stays the server's
            command = ["nice", "-n", str(nice), *command]
        env = {"SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_CONNECT_MODE": "0"}
        self.log.unlink(missing_ok=True)
        with _SPAWNING:  # the JVM is recorded before this process may end (settle_ahead)
            process = spawn(command, self.log, env=env)
            server = RunningServer(process, port, pyspark_version())
            record = {"pid": process.pid, "started": process.started, "port": port, "version": server.version}
            self._record.write_text(json.dumps(record))
        deadline = Deadline(START_SECONDS)
        while not deadline.passed():
            if not process.alive():
                if "java.net.BindException" in self.log.read_text(errors="replace"):
                    return None
                said = " ".join(line.strip() for line in tail(self.log, 3)) or "no output"
                raise DimsterError(f"dimster's Spark server exited while starting: {said} (log: {self.log})")
            if process.listens_on(port):
                return server
            time.sleep(0.2)
        process.stop(15)
        raise DimsterError(f"dimster's Spark server did not listen within {START_SECONDS} s; its log: {self.log}")

    def stop(self, if_idle: bool = False) -> bool:
        """End the server once no summary runs on it (with `if_idle`, only if none does now); whether
        one was ended."""
        server = self.running()
        if server is None:
            return False
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.folder / "use.lock", "w") as use:
            try:
                fcntl.flock(use, fcntl.LOCK_EX | (fcntl.LOCK_NB if if_idle else 0))
            except BlockingIOError:
                return False  # a summary of another process is running on it: it ends on its next turn
            server.process.stop(15)
        return True


def start_ahead_for(master: str | None) -> None:
    """A run that will summarize on dimster's own server starts it as the run starts
    (SparkService.start_ahead), unless DIMSTER_SPARK_AHEAD=0."""
    if master == EMBEDDED and os.environ.get("DIMSTER_SPARK_AHEAD", "1") != "0":
        SparkService().start_ahead()


def _usable(server: RunningServer) -> bool:
    """A server of this PySpark that listens on its port."""
    return server.version == pyspark_version() and server.process.listens_on(server.port)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _confs(port: int) -> list[str]:
    confs = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # A summary is some twenty queries over a few MB: Spark's generated code (Janino compiles it
        # anew for each query) cost more than it saved; interpreted, a warm summary takes a third less CPU.
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }
    return [arg for key, value in confs.items() for arg in ("--conf", f"{key}={value}")]


def _spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def _log4j() -> str:
    from importlib import resources

    return str(resources.files("dimster.pipeline") / "log4j2-spark.properties")


class StallWatch:
    """Ends a server whose JVM runs no code for STALL_SECONDS while a summary uses it (stopped, or
    frozen): the summary's requests, which have no deadline, then fail at once instead of waiting
    forever, and the next summary starts a new server. A working server always runs some code: its
    queries, its garbage collector, its network threads."""

    def __init__(self, server: RunningServer):
        self.server = server
        self.seconds = STALL_SECONDS
        self.ended = False  # whether the watch ended the server
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="spark-stall-watch", daemon=True)

    @property
    def url(self) -> str:
        return self.server.url

    def __enter__(self) -> "StallWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        process = self.server.process
        last, since = process.cpu_seconds(), time.monotonic()
        while not self._done.wait(WATCH_PERIOD):
            now = process.cpu_seconds()
            if now is None:  # gone: the summary says so itself
                return
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= self.seconds:
                self.ended = True
                with contextlib.suppress(DimsterError):  # gone meanwhile: nothing to end
                    process.kill()
                return
