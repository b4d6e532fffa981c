"""A Spark session for dimster's jobs: `local[*]` unless told otherwise, on loopback, and ended with
its JVM (tracked by PID) when the job is done. Spark's JVM writes to a log file (the run's
`logs/spark.log`), not the console; its last lines come with an error."""

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from dimster.errors import DimsterError

DEFAULT_MASTER = "local[*]"
# Dimster's Spark jobs are many small queries in a JVM that lives one summary: the C2 compiler's work
# costs more than it returns there, the client compiler alone is a fifth faster (docs/benchmarks.md,
# "Spark summary cost"). Alone it shrinks the code cache to 48 MB, which a JVM that lives through many
# summaries (a kept session, a campaign's) fills and then dies of: the cache keeps the default 240 MB.
# DIMSTER_SPARK_DRIVER_JAVA_OPTS replaces these options of the driver's JVM.
DRIVER_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
_kept: dict[str, object] = {}  # master -> the session kept_spark_session() holds open in this process


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


@contextlib.contextmanager
def kept_spark_session(master: str, log: Path) -> Iterator:
    """One session for every job on `master` in this process while the block lasts, instead of a JVM
    started and ended for each: for a caller that summarizes many small folders (the test suite)."""
    with spark_session(master, log) as session:
        _kept[master] = session
        try:
            yield session
        finally:
            del _kept[master]


def log_tail(log: Path, lines: int = 15) -> str:
    """The last lines of Spark's log, to show with an error."""
    if not log.is_file():
        return ""
    return "\n".join([f"(last lines of {log})", *log.read_text(errors="replace").splitlines()[-lines:]])


@contextlib.contextmanager
def spark_session(master: str, log: Path, app_name: str = "dimster-summary") -> Iterator:
    """A session whose JVM writes to `log`; a DimsterError raised while it is open carries the log's tail.
    Inside kept_spark_session(master) it is that session, left open (its JVM writes to its own log)."""
    if master in _kept:
        yield _kept[master]
        return
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    log4j = resources.files("dimster.pipeline") / "log4j2-spark.properties"
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    driver_java_opts = os.environ.get("DIMSTER_SPARK_DRIVER_JAVA_OPTS", DRIVER_JAVA_OPTS)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j} {driver_java_opts}")
        .config("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
        .config("spark.driver.memory", os.environ.get("DIMSTER_SPARK_DRIVER_MEMORY", "1g"))
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    try:
        with _output_to(log):
            session = builder.getOrCreate()
    except Exception as e:  # Spark's own start-up errors are long; one line says what failed
        raise DimsterError(
            f"could not start Spark (master {master}): {str(e).splitlines()[0]}", detail=log_tail(log)
        ) from None
    session.sparkContext.setLogLevel("ERROR")
    warnings.filterwarnings("ignore", module="pyspark")
    gateway = session.sparkContext._gateway
    try:
        yield session
    except DimsterError as e:
        e.detail = e.detail or log_tail(log)
        raise
    finally:
        session.stop()
        process = getattr(gateway, "proc", None)
        if process is not None and process.poll() is None:  # the JVM we started, by PID
            process.terminate()
            try:
                process.wait(15)
            except Exception:
                process.kill()
        # That JVM is gone: the next session in this process must start its own.
        SparkContext._gateway = None
        SparkContext._jvm = None
