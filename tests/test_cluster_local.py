"""The `local` environment on the real Apache Kafka: lifecycle, records, share groups. The tests share
the session's warm `local` (the `local_cluster` fixture brings it up or reuses it) through topics and
groups of their own; the lifecycle of a node killed behind dimster's back, and `down`, play out on a
one-node cluster of the test's own."""

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from dimster.environment import DEFAULT_KAFKA_VERSION, load_environment
from dimster.kafka.admin import wait_until_partitions_serve
from dimster.kafka.distribution import kafka_distribution
from tests.conftest import dimster, our_java_processes, set_broker_config, spare_ports_yaml, write_environment
from tests.kafka_clients import consume_group, consume_share_group, create_topic, produce_numbers

pytestmark = pytest.mark.kafka


def status_json(env: str = "local", cli_env: dict[str, str] | None = None) -> dict:
    result = dimster("cluster", "status", env, "--json", env=cli_env)
    return {"code": result.code, **json.loads(result.stdout)}


def share_group_members(bootstrap: str, group: str) -> list[set[str]]:
    """Each member's assigned partitions ('topic:partition'), as Kafka's own kafka-share-groups tool
    describes the group."""
    command = kafka_distribution(DEFAULT_KAFKA_VERSION).java(
        "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
        *("--bootstrap-server", bootstrap, "--describe", "--members", "--verbose", "--group", group),
    )
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line.split() for line in result.stdout.splitlines() if line.strip()]
    header = lines[0]
    assignment = header.index("ASSIGNMENT")
    members = []
    for line in lines[1:]:
        partitions = set()
        for item in line[assignment:]:
            topic, numbers = item.rsplit(":", 1)
            partitions.update(f"{topic}:{n}" for n in numbers.split(",") if n and n != "-")
        members.append(partitions)
    return members


def await_members(bootstrap: str, group: str, count: int, timeout: float = 60) -> list[set[str]]:
    """The group's members once `count` of them hold partitions (or what there is at the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        members = share_group_members(bootstrap, group)
        if (len(members) == count and all(members)) or time.monotonic() > deadline:
            return members
        time.sleep(1)


def test_status_reports_one_healthy_node(local_cluster):
    status = status_json()
    assert status["code"] == 0
    assert status["healthy"] and status["kafka_version"] == DEFAULT_KAFKA_VERSION
    assert status["bootstrap_servers"] == local_cluster
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


def test_up_again_reuses_the_running_cluster_and_still_checks_its_broker_config(local_cluster, project):
    """A second `up` keeps the nodes; a broker config the nodes do not run is still checked (a bad
    value is one error line) and, when valid, named with the command that applies it."""
    before = [n["pid"] for n in status_json()["nodes"]]
    result = dimster("cluster", "up", "local")
    assert result.code == 0 and "reusing" in result.stderr
    assert [n["pid"] for n in status_json()["nodes"]] == before

    edited = {"DIMSTER_PROJECT_DIR": str(project)}
    set_broker_config(project, "group.share.partition.max.record.locks", 5)  # Kafka's minimum is 100
    refused = dimster("cluster", "up", "local", env=edited)
    assert refused.code == 2 and "reusing" in refused.stderr, refused.stderr
    [line] = refused.error_lines
    assert "invalid broker config" in line and "group.share.partition.max.record.locks" in line, line
    set_broker_config(project, "group.share.partition.max.record.locks", 400)
    noted = dimster("cluster", "up", "local", env=edited)
    assert noted.code == 0, noted.stderr
    [note] = [line for line in noted.stderr.splitlines() if "another broker config" in line]
    assert "group.share.partition.max.record.locks" in note and "`dimster cluster redeploy local`" in note, note
    assert [n["pid"] for n in status_json()["nodes"]] == before


def test_ten_thousand_records_round_trip_through_a_consumer_group_and_once_each_through_a_share_group(
    local_cluster,
):
    topic = create_topic(local_cluster, partitions=3)
    produce_numbers(local_cluster, topic, 10_000)
    values = consume_group(local_cluster, topic, 10_000)
    assert sorted(int(v) for v in values) == list(range(10_000))

    members = []
    values, _ = consume_share_group(
        local_cluster,
        topic,
        consumers=3,
        expected=10_000,
        while_running=lambda group: members.extend(await_members(local_cluster, group, 3)),
    )
    assert len(values) == 10_000, f"received {len(values)} records"
    assert sorted(int(v) for v in values) == list(range(10_000))  # none missing, none twice
    # All three were members of the group, and Kafka assigned them every partition between them. How
    # many records each got depends on who polled first, so that is not asserted.
    assert len(members) == 3, members
    assert set().union(*members) == {f"{topic}:{p}" for p in range(3)}


def test_logs_show_the_broker_log(local_cluster):
    result = dimster("cluster", "logs", "local", "--lines", "5")
    assert result.code == 0
    assert result.stdout.count("[1] ") == 5


# What a run's broker watch does every second (coordinator/observers/cluster_watch.py), in four threads
# without a pause, until its stdin closes; it prints each thread's views of the registered brokers,
# in order, without repeats. With librdkafka's describe_cluster, which dimster once used for it, a
# watch like it aborted (SIGABRT) in 3 of 3 tries here while the broker stopped: a stopping broker,
# fenced, answers Metadata with no broker (and so do a starting cluster's, as `cluster up` of the
# three-node cluster met beside a busy suite).
WATCH = """
import json, sys, threading
from dimster.kafka.admin import registered_brokers
views, done = [[] for _ in range(4)], threading.Event()
def watch(mine):
    while not done.is_set():
        now = sorted(registered_brokers(sys.argv[1], timeout=1.0))
        if not mine or mine[-1] != now:
            mine.append(now)
threads = [threading.Thread(target=watch, args=(v,)) for v in views]
for t in threads:
    t.start()
sys.stdin.read()
done.set()
for t in threads:
    t.join()
print(json.dumps(views))
"""


def test_a_node_killed_behind_dimsters_back_is_stale_state_and_down_stops_every_node(project):
    """... and a broker watch that asks for the registered brokers all along the node's stop neither
    fails nor misses it."""
    env, cli_env = "lifecycle", {"DIMSTER_PROJECT_DIR": str(project)}
    write_environment(project, env, f"backend: local\nnodes: 1\nheap: 512m\nhost: 127.0.0.1\n{spare_ports_yaml(1)}")
    try:
        assert dimster("cluster", "up", env, env=cli_env).code == 0
        cluster_dir = load_environment_of(project, env).cluster_dir
        [node] = status_json(env, cli_env)["nodes"]
        psutil.Process(node["pid"]).kill()
        psutil.Process(node["pid"]).wait(30)
        assert status_json(env, cli_env)["code"] == 1  # unhealthy: the recorded process is gone
        result = dimster("cluster", "up", env, env=cli_env)
        assert result.code == 0, result.stderr
        assert "stale state" in result.stderr
        status = status_json(env, cli_env)
        assert status["healthy"] and status["nodes"][0]["pid"] != node["pid"]
        assert_maps_its_class_archive(status["nodes"][0]["pid"])

        pids = [n["pid"] for n in status["nodes"]]
        bootstrap = load_environment_of(project, env).bootstrap_servers
        watch = subprocess.Popen(
            [sys.executable, "-c", WATCH, bootstrap], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        result = dimster("cluster", "down", env, env=cli_env)
        assert result.code == 0 and "stopped 1 node" in result.stdout
        seen, _ = watch.communicate("", timeout=30)  # stdin closed: the watch ends
        assert watch.returncode == 0, f"the broker watch ended with {watch.returncode}: {seen}"
        for views in json.loads(seen):  # each thread saw the broker, then none
            assert views[0] == [node["node_id"]] and views[-1] == [], seen
        assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
        assert not our_java_processes(cluster_dir)
        assert status_json(env, cli_env)["code"] == 1
        assert dimster("cluster", "down", env, env=cli_env).stdout.strip() == f"'{env}': nothing was running"
    finally:
        dimster("cluster", "down", env, env=cli_env)


def assert_maps_its_class_archive(pid: int) -> None:
    """A broker given the class-data archive of its distribution (class_sharing.py) maps it; before there
    is one, it writes the class list the archive is made from, or goes on without either."""
    options = [arg for arg in psutil.Process(pid).cmdline() if arg.startswith("-XX:Shared") or "ClassList" in arg]
    assert len(options) <= 1, options
    if options and options[0].startswith("-XX:SharedArchiveFile="):
        archive = os.path.realpath(options[0].split("=", 1)[1])
        assert archive in Path(f"/proc/{pid}/maps").read_text()
    elif options:  # without one (another start may be writing the list or making it), none at all
        assert options[0].startswith("-XX:DumpLoadedClassList="), options


def load_environment_of(project, env: str):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DIMSTER_PROJECT_DIR", str(project))
        return load_environment(env)
