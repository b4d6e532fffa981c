"""The cluster throughput_vs_kafka_perf.py measures on: the environment's running cluster, or a scratch
project's, started and stopped here; and its topics and share groups, made through the coordinator's
own Admin helpers (coordinator/observers/run_kafka.py), as a run makes them."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from common import DIMSTER, ROOT

from dimster.coordinator.observers.run_kafka import SHARE_GROUP_START, RunKafka, group_config_resources
from dimster.kafka.admin import admin_client
from dimster.paths import environments_dir
from dimster.workload.model import Workload

DEFAULT_ENV = "bench"
SCRATCH_PORTS = {
    "brokerPortBase": 19892,
    "controllerPortBase": 19992,
    "brokerMetricsPortBase": 20192,
}  # clear of the shipped profiles (19092-19700) and metrics_overhead.py (20092)

log = logging.getLogger("bench")


@dataclass
class Cluster:
    env: str
    bootstrap: str
    kafka_version: str
    broker_pids: list[int]

    def run_kafka(self) -> RunKafka:
        """The coordinator's access to this cluster's topics and groups."""
        return RunKafka(self.bootstrap, self.kafka_version)


def dimster_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the dimster CLI of this interpreter with the current DIMSTER_* environment."""
    result = subprocess.run([*DIMSTER, *args], capture_output=True, text=True, env=os.environ)
    if check and result.returncode != 0:
        raise SystemExit(f"`dimster {' '.join(args)}` failed ({result.returncode}): {result.stderr.strip()}")
    return result


def make_scratch_project(root: Path, env: str) -> None:
    """A project folder with `env` = local.yaml on the scratch ports, and the broker configs."""
    (root / "run" / "environments").mkdir(parents=True)
    shutil.copytree(ROOT / "run" / "broker-configs", root / "run" / "broker-configs")
    text = (ROOT / "run" / "environments" / "local.yaml").read_text()
    for key, port in SCRATCH_PORTS.items():
        text, count = re.subn(rf"(?m)^({key}:\s*)\d+", rf"\g<1>{port}", text)
        if count != 1:
            raise SystemExit(f"run/environments/local.yaml has no single '{key}:' line to move to {port}")
    (root / "run" / "environments" / f"{env}.yaml").write_text(text)


@contextlib.contextmanager
def bench_cluster(env: str) -> Iterator[Cluster]:
    """The running cluster of `env`; started (and at the end stopped) here unless it already ran."""
    scratch: Path | None = None
    if not (environments_dir() / f"{env}.yaml").is_file():
        scratch = Path(tempfile.mkdtemp(prefix="dimster-bench-"))
        make_scratch_project(scratch, env)
        os.environ["DIMSTER_PROJECT_DIR"] = str(scratch)
        os.environ["DIMSTER_STATE_DIR"] = str(scratch / "state")  # never a recorded cluster of the same name
        log.info("scratch project %s", scratch)
    started = False
    try:
        if dimster_cli("cluster", "status", env, check=False).returncode != 0:
            log.info("starting cluster '%s' ...", env)
            started = True
            dimster_cli("cluster", "up", env)
        status = json.loads(dimster_cli("cluster", "status", env, "--json").stdout)
        yield Cluster(
            env,
            status["bootstrap_servers"],
            status["kafka_version"],
            [n["pid"] for n in status.get("nodes", []) if n.get("pid")],
        )
    finally:
        if started:
            log.info("stopping cluster '%s' ...", env)
            dimster_cli("cluster", "down", env, *(["--purge"] if scratch else []), check=False)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def create_topic(cluster: Cluster, topic: str, partitions: int) -> None:
    """A topic of `partitions` partitions and one replica, served before this returns (as a run's)."""
    workload = Workload.model_validate({"name": "bench", "partitionsPerTopic": partitions, "replicationFactor": 1})
    cluster.run_kafka().prepare(workload, [topic], [])


def delete_topic(cluster: Cluster, topic: str) -> None:
    """Delete `topic`; a topic that cannot be deleted is left behind without a word."""
    cluster.run_kafka().delete_topics([topic])


def share_groups_from_earliest(cluster: Cluster, groups: list[str]) -> None:
    """Share groups start at the latest offset by default; these start at the earliest."""
    admin = admin_client(cluster.bootstrap)  # referenced until every future has resolved
    resources = group_config_resources(groups, {}, SHARE_GROUP_START)
    cluster.run_kafka().results(admin.incremental_alter_configs(resources), "the config of")
