"""Consumer groups on the real `local` cluster: a live restart of one consumer (`--set
restartConsumers=1`) moves partitions between the other members of a dynamic group, and between
nobody's with static membership (every member's rebalance callbacks are events and counts); a
consumer that pauses most of its partitions before every poll (flowControl) loses nothing."""

import json
import time
from pathlib import Path

import pytest

from tests.conftest import dimster
from tests.runs import run_info, run_until, status, table, wait, write_workload

pytestmark = pytest.mark.kafka

REBALANCE_EVENTS = ("consumer_assigned", "consumer_revoked", "consumer_lost")


def rebalance_events(bundle: Path) -> list[dict]:
    lines = (bundle / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] in REBALANCE_EVENTS]


def assigned_again(event: dict, client: str, since: float) -> bool:
    return event["client"] == client and event["event"] == "consumer_assigned" and event["at"] >= since


# one library each way: both report their callbacks; the member's id decides, not the library
@pytest.mark.parametrize(("library", "static"), [("librdkafka", False), ("java", True)])
def test_a_restarted_consumer_moves_partitions_unless_it_is_a_static_member(tmp_path, library, static):
    workload = write_workload(
        tmp_path,
        f"restart-{library}-{'static' if static else 'dynamic'}",
        consumerType="CONSUMER_GROUP",
        clientLibrary=library,
        staticMembership=static,
        producerRate=300,
        warmupSeconds=0,
        durationSeconds=0,
        reportIntervalSeconds=2,
    )
    command = ["run", "local", "-w", str(workload), "--detach", "--json", "--no-summary"]
    started = dimster(*command, "--results", str(tmp_path / "results"))
    assert started.code == 0, started.stderr
    bundle = Path(json.loads(started.stdout)["results"])
    try:
        wait("elapsedSeconds>3 and received>300")
        joined = rebalance_events(bundle)
        restart = dimster("run", "local", "--modify", "--set", "restartConsumers=1", "--json")
        assert restart.code == 0, restart.stderr
        [applied] = json.loads(restart.stdout)["applied"]
        [restarted] = applied["clients"]
        rejoined = time.monotonic() + 90  # the restarted member holds partitions again
        while not [e for e in rebalance_events(bundle) if assigned_again(e, restarted, applied["applied"])]:
            assert time.monotonic() < rejoined, rebalance_events(bundle)
            time.sleep(0.5)
        wait(f"received>{status()['received'] + 300}", timeout=120)
    finally:
        stopping = time.time()  # from here on each member's own close revokes its partitions
        dimster("stop", "local")

    info = run_info(bundle)
    assert info["status"] == "completed" and info["totals"]["lost"] == 0
    # once all 3 had joined (each join a rebalance: eager assignment revokes everything each time),
    # each member's last assignment was its share of the 3 partitions
    last = {e["client"]: e["partitions"] for e in joined if e["event"] == "consumer_assigned"}
    assert sorted(last) == ["c0", "c1", "c2"] and sum(last.values()) == 3, joined
    after = [e for e in rebalance_events(bundle) if applied["applied"] <= e["at"] < stopping]
    mine = [e["event"] for e in after if e["client"] == restarted]
    others = [(e["client"], e["event"]) for e in after if e["client"] != restarted]
    assert mine[0] == "consumer_revoked" and mine[-1] == "consumer_assigned", mine  # it left and joined again
    if static:  # the group kept its assignment for the member's id: nobody else was told anything
        assert others == [], others
    else:  # its partitions went to the others, and came back
        assert {"consumer_revoked", "consumer_assigned"} <= {event for _, event in others}, others
    # run.json counts what the events say, per group
    [group] = info["groups"]
    counted = {kind: n for kind, n in info["rebalances"][group].items() if n}
    seen = [e["event"].removeprefix("consumer_") for e in rebalance_events(bundle)]
    assert counted == {kind: seen.count(kind) for kind in set(seen)}


@pytest.mark.parametrize("library", ["librdkafka", "java"])
def test_a_consumer_pausing_9_of_its_10_partitions_before_every_poll_loses_nothing(tmp_path, library):
    bundle = run_until(
        tmp_path,
        f"flow-{library}",
        "received>=300",  # 30 records a partition, the consumer's polls switching partitions all along
        consumerType="CONSUMER_GROUP",
        clientLibrary=library,
        partitionsPerTopic=10,
        producerRate=100,
        consumersPerGroup=1,
        drainTimeoutSeconds=120,  # a consumer that pauses 9 of 10 drains slowly on a busy machine
        flowControl={"pausedFraction": 0.9},
    )
    totals = run_info(bundle)["totals"]
    assert totals["received"] == totals["sent"] >= 300 and totals["lost"] == totals["duplicates"] == 0
    consumer = table(bundle, "intervals").query("role == 'consumer'")
    assert consumer.max_poll_partitions.max() == 1  # each poll's records came from its one unpaused partition
