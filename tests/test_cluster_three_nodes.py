"""A three-node cluster (the localBeefy profile): health, rolling redeploy that keeps data, down."""

import json

import pytest
import yaml
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.conftest import dimster, our_java_processes
from tests.kafka_clients import consume_group, create_topic, produce_numbers

LOCKS = "group.share.partition.max.record.locks"


@pytest.fixture(scope="module")
def beefy(tmp_path_factory):
    """localBeefy from a scratch copy of run/, so the test may edit its broker config."""
    import shutil

    from tests.conftest import REPO

    project = tmp_path_factory.mktemp("beefy-project")
    shutil.copytree(REPO / "run", project / "run")
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    result = dimster("cluster", "up", "localBeefy", env=env)
    assert result.code == 0, result.stderr
    yield project, env, json.loads(dimster("cluster", "status", "localBeefy", "--json", env=env).stdout)
    dimster("cluster", "down", "localBeefy", env=env)


def broker_config(bootstrap: str, broker: int, key: str) -> str:
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_configs([resource]).values()
    return future.result(timeout=30)[key].value


def test_three_brokers_healthy(beefy):
    _, _, status = beefy
    assert status["healthy"]
    assert [n["node_id"] for n in status["nodes"]] == [1, 2, 3]
    assert all(n["registered"] and n["alive"] for n in status["nodes"])
    assert len({n["pid"] for n in status["nodes"]}) == 3


def test_redeploy_changes_record_locks_and_keeps_data(beefy):
    project, env, status = beefy
    bootstrap = status["bootstrap_servers"]
    assert {broker_config(bootstrap, b, LOCKS) for b in (1, 2, 3)} == {"2000"}
    topic = create_topic(bootstrap, partitions=3, replication=3)
    produce_numbers(bootstrap, topic, 3_000)

    config_file = project / "run/broker-configs/default.yaml"
    config = yaml.safe_load(config_file.read_text())
    config[LOCKS] = 4000
    config_file.write_text(yaml.safe_dump(config))
    result = dimster("cluster", "redeploy", "localBeefy", "--json", env=env)
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["restarted"] == {LOCKS: "4000"} and report["restarted_nodes"] == [1, 2, 3]

    assert {broker_config(bootstrap, b, LOCKS) for b in (1, 2, 3)} == {"4000"}
    after = json.loads(dimster("cluster", "status", "localBeefy", "--json", env=env).stdout)
    assert after["healthy"]
    assert not {n["pid"] for n in after["nodes"]} & {n["pid"] for n in status["nodes"]}  # all restarted
    values = consume_group(bootstrap, topic, 3_000)
    assert sorted(int(v) for v in values) == list(range(3_000))


def test_redeploy_applies_dynamic_config_without_restart(beefy):
    project, env, _ = beefy
    before = json.loads(dimster("cluster", "status", "localBeefy", "--json", env=env).stdout)
    config_file = project / "run/broker-configs/default.yaml"
    config = yaml.safe_load(config_file.read_text())
    config["message.max.bytes"] = 2_000_000
    config_file.write_text(yaml.safe_dump(config))
    result = dimster("cluster", "redeploy", "localBeefy", "--json", env=env)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "dynamic": {"message.max.bytes": "2000000"},
        "restarted": {},
        "restarted_nodes": [],
    }
    after = json.loads(dimster("cluster", "status", "localBeefy", "--json", env=env).stdout)
    assert [n["pid"] for n in after["nodes"]] == [n["pid"] for n in before["nodes"]]
    assert broker_config(before["bootstrap_servers"], 3, "message.max.bytes") == "2000000"


def test_down_leaves_nothing_running(beefy, state_dir):
    _, env, _ = beefy
    result = dimster("cluster", "down", "localBeefy", env=env)
    assert result.code == 0 and "stopped 3 node(s)" in result.stdout
    assert not our_java_processes(state_dir)
