"""Numbers that measure Kafka, on the real cluster: what a run could not drain is reported as
unconsumed, not lost, and consumers added live are recorded once they hold their assignment. (The
start barrier and the measured phase's latencies: tests/test_run.py.)"""

import json
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import dimster
from tests.runs import events, run_info, run_until

pytestmark = [pytest.mark.kafka]


@pytest.mark.parametrize("consumer_type", ["SHARE_GROUP", "CONSUMER_GROUP"])
def test_a_drain_that_times_out_leaves_records_unconsumed_not_lost(tmp_path, consumer_type):
    """One slow consumer (20 ms a record) cannot keep up with 200 msg/s; the run stops once 800 records
    wait, and the drain gets one second."""
    bundle = run_until(
        tmp_path,
        f"undrained-{consumer_type.lower()}",
        "backlog>=800",
        consumerType=consumer_type,
        producersPerTopic=1,
        producerRate=200,
        consumersPerGroup=1,
        consumerProcMsMin=20,
        consumerProcMsMax=20,
        warmupSeconds=0,
        drainTimeoutSeconds=1,
        kafkaConfig={"shareConsumerConfig": {"max.poll.records": 10}, "consumerConfig": {"max.poll.records": 10}},
    )
    totals = run_info(bundle)["totals"]
    drain = events(bundle, "drain_ended")
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
    assigned = events(bundle, "consumers_assigned")
    assert [(e["members"], e["live"]) for e in assigned] == [(1, False), (3, True)]
    [load] = events(bundle, "load_started")
    assert assigned[1]["time"] > load["time"]
    assert run_info(bundle)["totals"]["lost"] == 0
