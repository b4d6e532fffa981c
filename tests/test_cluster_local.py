"""The `local` environment on the real Apache Kafka: lifecycle, records, share groups. Tests in
this module run in order; the last one takes the cluster down."""

import json
import uuid

import psutil
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from dimster.kafka.admin import wait_until_partitions_serve
from tests.conftest import dimster, our_java_processes
from tests.kafka_clients import consume_group, consume_share_group, create_topic, produce_numbers

BOOTSTRAP = "127.0.0.1:19092"


@pytest.fixture(scope="module")
def local_cluster():
    result = dimster("cluster", "up", "local")
    assert result.code == 0, result.stderr
    yield BOOTSTRAP
    dimster("cluster", "down", "local")


def status_json(env: str = "local") -> dict:
    result = dimster("cluster", "status", env, "--json")
    return {"code": result.code, **json.loads(result.stdout)}


def test_status_reports_one_healthy_node(local_cluster):
    status = status_json()
    assert status["code"] == 0
    assert status["healthy"] and status["kafka_version"] == "4.3.1"
    assert status["bootstrap_servers"] == BOOTSTRAP
    [node] = status["nodes"]
    assert node["registered"] and psutil.pid_exists(node["pid"])


def test_new_partitions_are_served_once_the_wait_returns(local_cluster):
    """Metadata names a new partition's leader before the broker serves it (ListOffsets answers
    NOT_LEADER_OR_FOLLOWER); runs wait for the broker, since an idempotent producer refused there can
    stay stuck."""
    admin = AdminClient({"bootstrap.servers": local_cluster})
    for _ in range(3):
        topic = f"served-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, 12, 1)])[topic].result(timeout=30)
        assert wait_until_partitions_serve(local_cluster, {topic: range(12)}, timeout=30)
        offsets = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(12)})
        assert [future.result(timeout=30).offset for future in offsets.values()] == [0] * 12


def test_up_again_reuses_the_running_cluster(local_cluster):
    before = [n["pid"] for n in status_json()["nodes"]]
    result = dimster("cluster", "up", "local")
    assert result.code == 0 and "reusing" in result.stderr
    assert [n["pid"] for n in status_json()["nodes"]] == before


def test_ten_thousand_records_round_trip(local_cluster):
    topic = create_topic(local_cluster, partitions=3)
    produce_numbers(local_cluster, topic, 10_000)
    values = consume_group(local_cluster, topic, 10_000)
    assert sorted(int(v) for v in values) == list(range(10_000))


def test_share_group_of_three_receives_every_record_exactly_once(local_cluster):
    topic = create_topic(local_cluster, partitions=3)
    produce_numbers(local_cluster, topic, 10_000)
    values, per_consumer = consume_share_group(local_cluster, topic, consumers=3, expected=10_000)
    assert len(values) == 10_000, f"received {len(values)} records"
    assert sorted(int(v) for v in values) == list(range(10_000))  # none missing, none twice
    assert all(count > 0 for count in per_consumer), per_consumer  # the work was shared


def test_logs_show_the_broker_log(local_cluster):
    result = dimster("cluster", "logs", "local", "--lines", "5")
    assert result.code == 0
    assert result.stdout.count("[1] ") == 5


def test_stale_state_is_detected_and_cleaned(local_cluster, state_dir):
    [node] = status_json()["nodes"]
    psutil.Process(node["pid"]).kill()
    psutil.Process(node["pid"]).wait(30)
    assert status_json()["code"] == 1  # unhealthy: the recorded process is gone
    result = dimster("cluster", "up", "local")
    assert result.code == 0, result.stderr
    assert "stale state" in result.stderr
    status = status_json()
    assert status["healthy"] and status["nodes"][0]["pid"] != node["pid"]


def test_down_stops_every_node(local_cluster, state_dir):
    pids = [n["pid"] for n in status_json()["nodes"]]
    result = dimster("cluster", "down", "local")
    assert result.code == 0 and "stopped 1 node" in result.stdout
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    assert not our_java_processes(state_dir)
    assert status_json()["code"] == 1
    assert dimster("cluster", "down", "local").stdout.strip() == "'local': nothing was running"
