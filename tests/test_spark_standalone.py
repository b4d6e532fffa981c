"""The summary against a standalone Spark master (a master and two workers started from PySpark's own
jars on loopback, ended by PID), figure for figure the summary of dimster's warm server, named as
`embedded` and through its sc:// URL."""

import json
import os
import subprocess
import time
from pathlib import Path

import pyspark
import pytest

from dimster.pipeline import summary as summary_module
from dimster.pipeline.spark import use_generated_code as generated_code
from dimster.pipeline.spark_service import SparkService
from dimster.pipeline.summary import summarize
from tests.conftest import dimster, unused_port
from tests.synthetic import synthetic_run, unsummarized_copy

pytestmark = pytest.mark.spark

SPARK_HOME = Path(pyspark.__file__).parent
WORKERS = 2  # a summary's queries are then shuffled between two executors, as on a real cluster


@pytest.fixture
def standalone_master(tmp_path):
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(tmp_path / "spark-work"),
        "SPARK_LOG_DIR": str(tmp_path),
        # the master and its workers only hand out executors: the client compiler and a serial
        # collector are all they need (as dimster's own Spark server, pipeline/spark_service.py)
        "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "SPARK_DAEMON_MEMORY": "256m",
    }
    port = unused_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master_log = tmp_path / "master.log"
    processes = []
    with open(master_log, "w") as out:
        processes.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(unused_port()),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
    try:
        for index in range(WORKERS):
            with open(tmp_path / f"worker-{index}.log", "w") as out:
                processes.append(
                    subprocess.Popen(
                        [
                            spark_class,
                            "org.apache.spark.deploy.worker.Worker",
                            *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
                            *("--webui-port", str(unused_port()), url),
                        ],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                    )
                )
        deadline = time.time() + 90
        while master_log.read_text().count("Registering worker") < WORKERS:
            logs = " / ".join(path.read_text()[-1000:] for path in tmp_path.glob("worker-*.log"))
            assert time.time() < deadline, f"the standalone workers did not register: {logs}"
            time.sleep(0.5)
        yield url
    finally:
        for process in processes:  # ended by PID, as everything dimster's tests start
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def test_summary_on_a_standalone_master_with_two_workers_is_the_embedded_and_connect_summary(
    tmp_path, standalone_master, spark, monkeypatch
):
    """The same bundle summarized three ways: on dimster's warm server (embedded), through its
    sc:// URL, and on a standalone master whose two workers each run an executor; and a fourth with
    Spark's generated code, as a long run's summary runs."""
    run = tmp_path / "run"
    run.mkdir()
    samples = synthetic_run(run, seconds=6, consumers=2, per_second=1000)
    result = dimster("summarize", str(run), "--spark-master", standalone_master, timeout=300)
    assert result.code == 0, result.stderr
    summary = json.loads((run / "summary" / "summary.json").read_text())
    assert summary["latency_ms"]["e2e"]["count"] == sum(len(v) for v in samples.values())
    assert summary["throughput"]["seconds"] == 6
    executors = sorted(path.name for path in (tmp_path / "spark-work").glob("app-*/*"))
    assert len(executors) >= WORKERS, executors  # an executor on each worker
    # each ran with the client compiler only, as the driver (an executor lives one summary too)
    commands = [line for path in (tmp_path / "spark-work").glob("app-*/*/stderr") for line in path.open()]
    launched = [line for line in commands if line.startswith("Spark Executor Command:")]
    assert len(launched) >= WORKERS and all("-XX:TieredStopAtLevel=1" in line for line in launched), launched

    def summarized_on(name: str, master: str) -> dict:
        copy = unsummarized_copy(run, tmp_path / name)
        summarize(copy, master)
        return json.loads((copy / "summary" / "summary.json").read_text())

    assert summarized_on("embedded", spark) == summary
    server = SparkService().running()
    assert server is not None and summarized_on("connect", server.url) == summary
    # Spark's generated code, which a long run's summary uses (pipeline/spark.py): the same figures
    used: list[bool] = []
    monkeypatch.setattr(summary_module, "GENERATED_CODE_ROWS", 0)
    monkeypatch.setattr(summary_module, "use_generated_code", lambda s, on: (used.append(on), generated_code(s, on)))
    assert summarized_on("generated code", server.url) == summary and used == [True]
