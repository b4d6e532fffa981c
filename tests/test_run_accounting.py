"""Numbers that measure Kafka, on the real cluster: load starts only once every consumer holds its
assignment, the measured phase's latencies cover exactly the records it produced, and what a run
could not drain is reported as unconsumed, not lost."""

import json
import statistics
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import dimster
from tests.runs import REPO, run_info, run_to_end, table

pytestmark = [pytest.mark.kafka]


def events(bundle) -> list[dict]:
    return [json.loads(line) for line in (bundle / "events.jsonl").read_text().splitlines()]


def test_quickstart_summary_latency_is_the_steady_latency(tmp_path):
    quickstart = yaml.safe_load((REPO / "run/workloads/quickstart.yaml").read_text())
    keys = {k: v for k, v in quickstart.items() if k != "name"}
    keys["durationSeconds"] = 25
    bundle = run_to_end(tmp_path, "quickstart-check", summary=True, **keys)

    # the barrier: every consumer held its assignment before load started, and that is recorded
    kinds = [e["event"] for e in events(bundle)]
    assert "consumers_assigned" in kinds and kinds.index("consumers_assigned") < kinds.index("load_started")
    info = run_info(bundle)
    [(group, seconds)] = info["consumer_assignment_seconds"].items()
    assert group in info["groups"] and seconds > 0
    summary = json.loads((bundle / "summary" / "summary.json").read_text())
    assert summary["consumer_assignment_seconds"] == info["consumer_assignment_seconds"]

    # the measured phase's latencies cover exactly the records intended in it: each was consumed once
    latency = summary["latency_ms"]
    assert latency["e2e"]["count"] == latency["publish_delay"]["count"]
    intervals = table(bundle, "intervals")
    assert latency["e2e"]["count"] <= intervals[intervals.phase.isin(["measure", "drain"])].sent.sum()
    assert info["totals"]["lost"] == 0 and info["totals"]["unconsumed"] == 0

    # the first measured interval consumes what is produced: nothing waited for a joining consumer
    warmup = keys["warmupSeconds"]
    first = intervals[(intervals.run_time_s > warmup) & (intervals.run_time_s <= warmup + 5)]
    produced, consumed = first.sent.sum(), first.received.sum()
    assert consumed >= 0.9 * produced, (produced, consumed)

    # the headline p99 is the steady one, not start-up's
    per_second = pd.read_parquet(bundle / "summary" / "latency_per_second.parquet")
    steady = per_second[(per_second.metric == "e2e") & (per_second.second >= warmup)].p99
    assert latency["e2e"]["p99"] <= 3 * statistics.median(steady), (latency["e2e"]["p99"], list(steady))


@pytest.mark.parametrize("consumer_type", ["SHARE_GROUP", "CONSUMER_GROUP"])
def test_a_drain_that_times_out_leaves_records_unconsumed_not_lost(tmp_path, consumer_type):
    """One slow consumer (20 ms a record) cannot keep up with 200 msg/s; the drain gets one second."""
    bundle = run_to_end(
        tmp_path,
        f"undrained-{consumer_type.lower()}",
        consumerType=consumer_type,
        producersPerTopic=1,
        producerRate=200,
        consumersPerGroup=1,
        consumerProcMsMin=20,
        consumerProcMsMax=20,
        warmupSeconds=0,
        durationSeconds=10,
        drainTimeoutSeconds=1,
        kafkaConfig={"shareConsumerConfig": {"max.poll.records": 10}, "consumerConfig": {"max.poll.records": 10}},
    )
    totals = run_info(bundle)["totals"]
    drain = [e for e in events(bundle) if e["event"] == "drain_ended"]
    assert drain and drain[0]["drained"] is False
    assert totals["lost"] == 0, totals
    # what the group did not consume is still in the topic for it: at least what it never received
    assert totals["unconsumed"] >= totals["acked"] - totals["received"] > 500, totals


def test_consumers_added_live_record_when_they_hold_their_assignment(tmp_path):
    workload = tmp_path / "grow.yaml"
    workload.write_text(
        yaml.safe_dump(
            {
                "name": "grow",
                "partitionsPerTopic": 4,
                "producerRate": 200,
                "consumersPerGroup": 1,
                "warmupSeconds": 0,
                "durationSeconds": 0,
                "reportIntervalSeconds": 2,
            }
        )
    )
    started = dimster("run", "local", "-w", str(workload), "--detach", "--json", "--no-summary",
                      "--results", str(tmp_path / "results"))  # fmt: skip
    assert started.code == 0, started.stderr
    bundle = Path(json.loads(started.stdout)["results"])
    try:
        assert dimster("run", "local", "--modify", "--set", "consumersPerGroup=3").code == 0
        deadline = time.time() + 60
        while time.time() < deadline and not [e for e in events(bundle) if e.get("live")]:
            time.sleep(0.5)
    finally:
        assert dimster("stop", "local").code == 0
    assigned = [e for e in events(bundle) if e["event"] == "consumers_assigned"]
    assert [(e["members"], e["live"]) for e in assigned] == [(1, False), (3, True)]
    load = next(e for e in events(bundle) if e["event"] == "load_started")
    assert assigned[1]["time"] > load["time"]
    assert run_info(bundle)["totals"]["lost"] == 0
