"""A three-node cluster (the localBeefy profile, each node in a network namespace of its own on a
private subnet of the session's, node ids 4-6): health, rolling redeploy that keeps data, faults,
down. Each test stands alone: the `beefy` fixture brings the session's warm cluster up (or reuses it)."""

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import dimster, our_java_processes, set_broker_config
from tests.kafka_clients import broker_config, consume_group, create_topic, produce_numbers
from tests.runs import status, wait, write_workload
from tests.waiting import until

pytestmark = pytest.mark.kafka

LOCKS = "group.share.partition.max.record.locks"


def namespaces() -> set[str]:
    return {
        line.split()[0]
        for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
        if line.strip()
    }


def test_three_brokers_healthy(beefy):
    status = beefy.status()
    assert status["healthy"]
    network = beefy.network()
    assert status["bootstrap_servers"] == ",".join(
        f"{a}:{p}" for a, p in zip(network.addresses, [n["broker_port"] for n in status["nodes"]], strict=True)
    )
    assert {network.namespace(i) for i in range(3)} <= namespaces()
    assert [n["node_id"] for n in status["nodes"]] == beefy.node_ids
    assert all(n["registered"] and n["alive"] for n in status["nodes"])
    assert len({n["pid"] for n in status["nodes"]}) == 3


def test_redeploy_changes_record_locks_and_keeps_data(beefy):
    status = beefy.status()
    bootstrap = status["bootstrap_servers"]
    before = yaml.safe_load(beefy.config_file.read_text())[LOCKS]
    assert {broker_config(bootstrap, b, LOCKS) for b in beefy.node_ids} == {str(before)}
    topic = create_topic(bootstrap, partitions=3, replication=3)
    produce_numbers(bootstrap, topic, 3_000)

    locks = before + 2000
    set_broker_config(beefy.project, LOCKS, locks)
    result = dimster("cluster", "redeploy", "localBeefy", "--json", env=beefy.env)
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["restarted"] == {LOCKS: str(locks)} and report["restarted_nodes"] == beefy.node_ids

    assert {broker_config(bootstrap, b, LOCKS) for b in beefy.node_ids} == {str(locks)}
    after = beefy.status()
    assert after["healthy"]
    assert not {n["pid"] for n in after["nodes"]} & {n["pid"] for n in status["nodes"]}  # all restarted
    values = consume_group(bootstrap, topic, 3_000)
    assert sorted(int(v) for v in values) == list(range(3_000))


def test_redeploy_applies_dynamic_config_without_restart(beefy):
    before = beefy.status()
    size = int(broker_config(before["bootstrap_servers"], 6, "message.max.bytes")) + 1000
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
    assert broker_config(before["bootstrap_servers"], 6, "message.max.bytes") == str(size)


def test_a_run_through_a_kill_a_pause_a_restart_and_a_partition_loses_nothing_and_up_heals_only_what_broke(
    beefy, tmp_path
):
    workload = write_workload(
        tmp_path,
        "faults",
        replicationFactor=3,
        kafkaConfig={  # with acks=all (the default): two copies of every acknowledged record
            "producerConfig": {"linger.ms": 50},
            "topicConfig": {"min.insync.replicas": 2},
        },
        producersPerTopic=1,
        producerRate=100,
        warmupSeconds=0,
        durationSeconds=0,
        reportIntervalSeconds=2,
    )
    run = dimster(
        "run", "localBeefy", "-w", str(workload), "--detach", "--json", "--no-summary",
        "--results", str(tmp_path / "results"), env=beefy.env,
    )  # fmt: skip
    assert run.code == 0, run.stderr
    bundle = Path(json.loads(run.stdout)["results"])
    wait("received>100", env="localBeefy")
    pids = {n["node_id"]: n["pid"] for n in beefy.status()["nodes"]}

    def fault(action: str, node: int) -> str:
        result = dimster("cluster", action, "localBeefy", "--node", str(node), env=beefy.env)
        assert result.code == 0, result.stderr
        return result.stdout

    def more_received(count: int, timeout: int = 90) -> None:
        wait(f"received>{status('localBeefy')['received'] + count}", timeout=timeout, env="localBeefy")

    assert f"node 5 killed (SIGKILL to pid {pids[5]})" in fault("kill", 5)
    nodes = {n["node_id"]: n for n in beefy.status()["nodes"]}
    assert not nodes[5]["alive"] and nodes[4]["alive"] and nodes[6]["alive"]
    more_received(200)  # two in-sync copies are enough for acks=all

    up = dimster("cluster", "up", "localBeefy", env=beefy.env)
    assert up.code == 0, up.stderr
    assert "node 5 was not running: started it again with its data" in up.stderr
    assert "nodes [4, 6] kept running" in up.stderr and "stale" not in up.stderr
    after = {n["node_id"]: n["pid"] for n in beefy.status()["nodes"]}
    assert after[4] == pids[4] and after[6] == pids[6] and after[5] != pids[5]

    fault("pause", 6)
    paused = {n["node_id"]: n for n in beefy.status()["nodes"]}[6]
    assert paused["alive"] and paused["paused"]
    assert dimster("cluster", "status", "localBeefy", env=beefy.env).code == 1  # a paused node: unhealthy
    more_received(200)  # once the controller fences node 6, its partitions move to the others
    fault("resume", 6)
    assert dimster("cluster", "up", "localBeefy", env=beefy.env).code == 0  # until node 6 is registered again
    assert "node 4 restarted" in fault("restart", 4)
    more_received(300, timeout=120)

    assert "node 5 isolated from the other nodes" in fault("isolate", 5)
    isolated = {n["node_id"]: n for n in beefy.status()["nodes"]}[5]
    assert isolated["alive"] and isolated["isolated"] == "nodes"
    # fenced: the controller no longer hears it (clients still reach it, and wait on it as its own
    # partitions' leader until it rejoins: the faults table in docs/faults.md measures that stall)
    assert until(lambda: not {n["node_id"]: n for n in beefy.status()["nodes"]}[5]["registered"], 90, every=1)
    assert dimster("cluster", "isolate", "localBeefy", "--node", "5", env=beefy.env).code != 0  # already
    up = dimster("cluster", "up", "localBeefy", env=beefy.env)  # rejoins it, waits until it is registered
    assert up.code == 0 and "nodes [5] were isolated: rejoined them" in up.stderr, up.stderr
    more_received(200)
    assert dimster("stop", "localBeefy").code == 0

    info = json.loads((bundle / "run.json").read_text())
    assert info["status"] == "completed", info.get("failure")
    assert info["totals"]["lost"] == 0 and info["totals"]["sent"] == info["totals"]["acked"] > 0
    events = [json.loads(line) for line in (bundle / "events.jsonl").read_text().splitlines()]
    faults = [(e["action"], e["node"]) for e in events if e["event"] == "fault"]
    assert faults == [("kill", 5), ("pause", 6), ("resume", 6), ("restart", 4), ("isolate", 5)]
    assert ("broker_left", 5) in [(e["event"], e.get("broker")) for e in events]
    assert beefy.status()["healthy"]


def test_down_leaves_nothing_running(beefy):
    """Last of its scope (conftest.ENDS_ITS_CLUSTER): a test after it would bring the cluster up again."""
    cluster_dir = beefy.profile().cluster_dir
    result = dimster("cluster", "down", "localBeefy", env=beefy.env)
    assert result.code == 0 and "stopped 3 node(s)" in result.stdout
    assert not our_java_processes(cluster_dir)
    network = beefy.network()
    assert not {network.namespace(i) for i in range(3)} & namespaces()
    assert subprocess.run(["ip", "link", "show", network.bridge], capture_output=True).returncode != 0
