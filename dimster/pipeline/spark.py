"""A Spark session for dimster's jobs. `embedded` (the default): a client session of dimster's warm
Spark Connect server (spark_service.py); `sc://host:port`: any Spark Connect server; `local[N]` or
`spark://...`: a JVM of this process's own, on loopback, ended (tracked by PID) when the job is done.
Spark's JVM writes to a log file (the run's `logs/spark.log`, or the server's), not the console; its
last lines come with an error."""

import contextlib
import logging
import os
import re
import socket
import subprocess
import sys
import warnings
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from dimster.errors import DimsterError
from dimster.pipeline.spark_service import EMBEDDED, SparkService

DEFAULT_MASTER = EMBEDDED
SESSION_CONFS: dict[str, bool | float | int | str | None] = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
}
# Dimster's Spark jobs are many small queries in a JVM that lives one summary: the C2 compiler's work
# costs more than it returns there, the client compiler alone is a fifth faster (docs/benchmarks.md,
# "Spark summary cost"). Alone it shrinks the code cache to 48 MB, which a JVM that lives through many
# summaries (a campaign's) fills and then dies of: the cache keeps the default 240 MB.
# A standalone or YARN master's executors live one summary too, and get the same options.
# DIMSTER_SPARK_DRIVER_JAVA_OPTS and DIMSTER_SPARK_EXECUTOR_JAVA_OPTS replace them.
DRIVER_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# Spark's generated code (whole-stage, compiled anew for each query) costs a short run's summary about
# a second more than it saves; from about this many histogram rows (a two-minute run of 3 producers and
# 12 share consumers) it makes the summary faster, a 10-minute run's 2.5 times (docs/benchmarks.md).
GENERATED_CODE_ROWS = 200_000


def use_generated_code(session, on: bool) -> None:
    """Spark's generated code on or off for the queries of `session` (interpreted when off)."""
    session.conf.set("spark.sql.codegen.wholeStage", "true" if on else "false")
    session.conf.set("spark.sql.codegen.factoryMode", "FALLBACK" if on else "NO_CODEGEN")


def spark_master(option: str | None) -> str:
    return option or os.environ.get("DIMSTER_SPARK_MASTER") or DEFAULT_MASTER


@contextlib.contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """Send this process's stdout and stderr to `log`, at the file-descriptor level, so that the child
    processes started meanwhile (Spark's JVM) write there for good; ours come back afterwards."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "ab") as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, original in zip((1, 2), saved, strict=True):
            os.dup2(original, fd)
            os.close(original)


def log_tail(log: Path, lines: int = 15) -> str:
    """The last lines of Spark's log, to show with an error."""
    if not log.is_file():
        return ""
    return "\n".join([f"(last lines of {log})", *log.read_text(errors="replace").splitlines()[-lines:]])


def own_driver(master: str) -> bool:
    """Whether a session on `master` starts a Spark driver of this process's own (local[N], spark://)
    rather than being a client of a Connect server (embedded, sc://)."""
    return master != EMBEDDED and not master.startswith("sc://")


def shown(master: str) -> str:
    """`master` as dimster says it: a Connect URL without its parameters (its token is a secret)."""
    return master.split("/;")[0]


@contextlib.contextmanager
def spark_session(master: str, log: Path, app_name: str = "dimster-summary") -> Iterator:
    """A session on `master` (see above); a DimsterError raised while it is open carries the tail of its
    JVM's log: `log` for a driver of this process's own or a named Connect server, the server's own log
    for `embedded`."""
    if master == EMBEDDED:
        service = SparkService()
        with service.in_use() as watch:
            try:
                with _remote_session(watch.url, service.log) as session:
                    yield session
            except DimsterError as e:
                if not watch.ended:
                    raise
                hung = f"dimster's Spark server ran no code for {watch.seconds:g} s: it was ended"
                raise DimsterError(f"{e} ({hung}; the next summary starts a new one)", detail=e.detail) from None
    elif own_driver(master):
        with _own_driver_session(master, log, app_name) as session:
            yield session
    else:
        with _remote_session(master, log) as session:
            yield session


@contextlib.contextmanager
def _log_tail_on_error(log: Path) -> Iterator[None]:
    """A DimsterError raised in the block gets the tail of Spark's `log` as its detail, unless it has one."""
    try:
        yield
    except DimsterError as e:
        e.detail = e.detail or log_tail(log)
        raise


@contextlib.contextmanager
def _own_driver_session(master: str, log: Path, app_name: str) -> Iterator:
    """A session whose driver JVM this process starts (writing to `log`) and ends, by PID."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    log4j = resources.files("dimster.pipeline") / "log4j2-spark.properties"
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    driver_java_opts = os.environ.get("DIMSTER_SPARK_DRIVER_JAVA_OPTS", DRIVER_JAVA_OPTS)
    executor_java_opts = os.environ.get("DIMSTER_SPARK_EXECUTOR_JAVA_OPTS", DRIVER_JAVA_OPTS)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config(map=SESSION_CONFS)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j} {driver_java_opts}")
        .config("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j} {executor_java_opts}")
        .config("spark.driver.memory", os.environ.get("DIMSTER_SPARK_DRIVER_MEMORY", "1g"))
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    try:
        with _output_to(log):
            session = builder.getOrCreate()
    except Exception as e:  # Spark's own start-up errors are long; one line says what failed  # noqa: BLE001
        raise DimsterError(
            f"could not start Spark (master {master}): {str(e).splitlines()[0]}", detail=log_tail(log)
        ) from None
    session.sparkContext.setLogLevel("ERROR")
    warnings.filterwarnings("ignore", module="pyspark")
    gateway = session.sparkContext._gateway
    try:
        with _log_tail_on_error(log):
            yield session
    finally:
        session.stop()
        process = getattr(gateway, "proc", None)
        if process is not None and process.poll() is None:  # the JVM we started, by PID
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        # That JVM is gone: the next session in this process must start its own.
        SparkContext._gateway = None
        SparkContext._jvm = None


def _connect_address(url: str) -> tuple[str, int]:
    """Host and port of a Spark Connect URL (sc://HOST[:PORT][/;params]), 15002 unless given."""
    found = re.fullmatch(r"sc://(\[[^\]]+\]|[^:/]+)(?::(\d+))?(/.*)?", url)
    if found is None:
        valid = "sc://HOST:PORT, with /;token=... where one is set"
        raise DimsterError(f"invalid Spark Connect URL '{shown(url)}': {valid}")
    return found.group(1).strip("[]"), int(found.group(2) or 15002)


@contextlib.contextmanager
def _remote_session(url: str, log: Path) -> Iterator:
    """A Spark Connect client session of the server at `url`; the server's `log` tails an error."""
    logging.getLogger("pyspark").setLevel(logging.CRITICAL)
    host, port = _connect_address(url)
    try:
        socket.create_connection((host, port), timeout=10).close()
    except OSError as e:  # the client would retry for ten minutes before it said so
        raise DimsterError(f"could not reach Spark at {shown(url)}: {e.strerror or e}", detail=log_tail(log)) from None
    with contextlib.ExitStack() as cleanup:  # its callbacks run last first: the session, then PySpark's mark
        # PySpark's mark of a Connect client, which would make a later local session of this process one too
        cleanup.callback(os.environ.pop, "SPARK_CONNECT_MODE_ENABLED", None)
        session = _connected(url, log)
        cleanup.callback(_stop_quietly, session)
        warnings.filterwarnings("ignore", module="pyspark")
        with _log_tail_on_error(log):
            yield session


def _connected(url: str, log: Path):
    """A new client session of the Connect server at `url`, with dimster's session settings."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    try:
        session = SparkSession.builder.remote(url).config(map=SESSION_CONFS).create()
        # a server that goes away mid-summary fails it within seconds, not after ten minutes of retries;
        # results come whole on one stream (no reattaching, whose late releases the server logs as errors)
        session.client.set_retry_policies([DefaultPolicy(max_retries=6, max_backoff=2000)])
        session.client.disable_reattachable_execute()
    except Exception as e:  # Spark Connect's client raises kinds of its own: one line  # noqa: BLE001
        line = str(e).strip().splitlines()[0]
        raise DimsterError(f"could not reach Spark at {shown(url)}: {line}", detail=log_tail(log)) from None
    return session


def _stop_quietly(session) -> None:
    with contextlib.suppress(Exception):  # a server gone away: nothing to release
        session.stop()
