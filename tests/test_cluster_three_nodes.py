"""A three-node cluster (the localBeefy profile): health, rolling redeploy that keeps data, down.
Each test stands alone: the `beefy` fixture brings the cluster up (or reuses it)."""

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import copy_project, dimster, our_java_processes, set_broker_config
from tests.kafka_clients import broker_config, consume_group, create_topic, produce_numbers

pytestmark = pytest.mark.kafka

LOCKS = "group.share.partition.max.record.locks"


@dataclass
class Beefy:
    project: Path  # a scratch copy of the session's run/: the tests edit its broker config
    env: dict[str, str]

    def status(self) -> dict:
        return json.loads(dimster("cluster", "status", "localBeefy", "--json", env=self.env).stdout)

    @property
    def config_file(self) -> Path:
        return self.project / "run/broker-configs/default.yaml"


@pytest.fixture(scope="module")
def beefy_project(tmp_path_factory, scratch_project):
    project = copy_project(scratch_project, tmp_path_factory.mktemp("beefy-project"))
    beefy = Beefy(project, {"DIMSTER_PROJECT_DIR": str(project)})
    yield beefy
    assert dimster("cluster", "down", "localBeefy", env=beefy.env).code == 0


@pytest.fixture
def beefy(beefy_project) -> Beefy:
    """localBeefy up (started or reused) for this test."""
    result = dimster("cluster", "up", "localBeefy", env=beefy_project.env)
    assert result.code == 0, result.stderr
    return beefy_project


def test_three_brokers_healthy(beefy):
    status = beefy.status()
    assert status["healthy"]
    assert [n["node_id"] for n in status["nodes"]] == [1, 2, 3]
    assert all(n["registered"] and n["alive"] for n in status["nodes"])
    assert len({n["pid"] for n in status["nodes"]}) == 3


def test_redeploy_changes_record_locks_and_keeps_data(beefy):
    status = beefy.status()
    bootstrap = status["bootstrap_servers"]
    before = yaml.safe_load(beefy.config_file.read_text())[LOCKS]
    assert {broker_config(bootstrap, b, LOCKS) for b in (1, 2, 3)} == {str(before)}
    topic = create_topic(bootstrap, partitions=3, replication=3)
    produce_numbers(bootstrap, topic, 3_000)

    locks = before + 2000
    set_broker_config(beefy.project, LOCKS, locks)
    result = dimster("cluster", "redeploy", "localBeefy", "--json", env=beefy.env)
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["restarted"] == {LOCKS: str(locks)} and report["restarted_nodes"] == [1, 2, 3]

    assert {broker_config(bootstrap, b, LOCKS) for b in (1, 2, 3)} == {str(locks)}
    after = beefy.status()
    assert after["healthy"]
    assert not {n["pid"] for n in after["nodes"]} & {n["pid"] for n in status["nodes"]}  # all restarted
    values = consume_group(bootstrap, topic, 3_000)
    assert sorted(int(v) for v in values) == list(range(3_000))


def test_redeploy_applies_dynamic_config_without_restart(beefy):
    before = beefy.status()
    size = int(broker_config(before["bootstrap_servers"], 3, "message.max.bytes")) + 1000
    set_broker_config(beefy.project, "message.max.bytes", size)
    result = dimster("cluster", "redeploy", "localBeefy", "--json", env=beefy.env)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "dynamic": {"message.max.bytes": str(size)},
        "restarted": {},
        "restarted_nodes": [],
    }
    after = beefy.status()
    assert [n["pid"] for n in after["nodes"]] == [n["pid"] for n in before["nodes"]]
    assert broker_config(before["bootstrap_servers"], 3, "message.max.bytes") == str(size)


def test_down_leaves_nothing_running(beefy, state_dir):
    result = dimster("cluster", "down", "localBeefy", env=beefy.env)
    assert result.code == 0 and "stopped 3 node(s)" in result.stdout
    assert not our_java_processes(state_dir)
