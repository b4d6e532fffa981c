"""The summary against a standalone Spark master (a master and a worker started from PySpark's own
jars on loopback, ended by PID), not only local[*]."""

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pyspark
import pytest

from tests.conftest import dimster
from tests.synthetic import synthetic_run

pytestmark = pytest.mark.spark

SPARK_HOME = Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def standalone_master(tmp_path):
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(tmp_path / "spark-work"),
        "SPARK_LOG_DIR": str(tmp_path),
    }
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
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
                    str(free_port()),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
    try:
        with open(worker_log, "w") as out:
            processes.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "2",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(free_port()),
                        url,
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
        deadline = time.time() + 90
        while "Registering worker" not in master_log.read_text():
            assert time.time() < deadline, "the standalone worker did not register: " + worker_log.read_text()[-2000:]
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


def test_summary_on_a_standalone_master(tmp_path, standalone_master):
    run = tmp_path / "run"
    run.mkdir()
    samples = synthetic_run(run, seconds=6, consumers=2, per_second=1000)
    result = dimster("summarize", str(run), "--spark-master", standalone_master, timeout=300)
    assert result.code == 0, result.stderr
    summary = json.loads((run / "summary" / "summary.json").read_text())
    assert summary["latency_ms"]["e2e"]["count"] == sum(len(v) for v in samples.values())
    assert summary["throughput"]["seconds"] == 6
    assert "app-" in " ".join(p.name for p in (tmp_path / "spark-work").iterdir())  # it ran on the worker
