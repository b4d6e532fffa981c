"""A Spark session for dimster's jobs: `local[*]` unless told otherwise, quiet, on loopback, and
ended with its JVM (tracked by PID) when the job is done."""

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator
from importlib import resources

from dimster.errors import DimsterError

DEFAULT_MASTER = "local[*]"


def spark_master(option: str | None) -> str:
    return option or os.environ.get("DIMSTER_SPARK_MASTER") or DEFAULT_MASTER


@contextlib.contextmanager
def spark_session(master: str, app_name: str = "dimster-summary") -> Iterator:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    log4j = resources.files("dimster.pipeline") / "log4j2-spark.properties"
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
        .config("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
        .config("spark.driver.memory", os.environ.get("DIMSTER_SPARK_DRIVER_MEMORY", "1g"))
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    try:
        session = builder.getOrCreate()
    except Exception as e:  # Spark's own start-up errors are long; one line says what failed
        raise DimsterError(f"could not start Spark (master {master}): {str(e).splitlines()[0]}") from None
    session.sparkContext.setLogLevel("ERROR")
    warnings.filterwarnings("ignore", module="pyspark")
    gateway = session.sparkContext._gateway
    try:
        yield session
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
