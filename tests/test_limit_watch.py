"""The live diagnosis (coordinator/loop/limit_watch.py) over console windows, with the workload as it is now:
told once after two windows behind, again when the binding limit moves, cleared when the group keeps
up; nothing for consumer groups or outside load. An in-memory stand-in for the coordinator."""

import json
from types import SimpleNamespace

import pytest

from dimster.coordinator.control.run_log import RunLog
from dimster.coordinator.loop.limit_watch import LimitWatch, is_behind, notes
from dimster.coordinator.loop.status import limit_status
from dimster.results.bundle import ResultsBundle
from dimster.workload.group_inputs import record_locks
from dimster.workload.model import Workload
from tests.cli import dimster

pytestmark = pytest.mark.unit

KEYS = {
    "name": "w", "partitionsPerTopic": 3, "consumersPerGroup": 12, "consumerProcMsMin": 5, "consumerProcMsMax": 5,
    "reportIntervalSeconds": 2, "groupConfig": {"share.partition.max.record.locks": 100},
    "kafkaConfig": {"shareConsumerConfig": {"max.poll.records": 50}},
}  # fmt: skip


def coordinator(tmp_path, lines: list[str], **keys):
    bundle = ResultsBundle(tmp_path, "w")
    return SimpleNamespace(
        workload=Workload.model_validate({**KEYS, **keys}),
        topology=SimpleNamespace(groups={"g": "t"}, topics=["t"]),
        aggregate=SimpleNamespace(producer_stats={"p0": (1.0, {"batch_records_avg": 52.0, "batch_bytes_avg": 6000.0})}),
        cluster=SimpleNamespace(broker_config=lambda: {}),
        bundle=bundle,
        log=RunLog(bundle, say=lines.append),
        observers=SimpleNamespace(handler_idle={1: 0.9}),
        phase="measure",
    )


def window(pub: float, cons: float, backlog: int) -> dict:
    return {
        "pubRate": pub, "consRate": cons, "backlog": backlog, "recordsPerPoll": 40.0, "workerWaitShare": 0.01,
        "seconds": 2.0,
    }  # fmt: skip


def limit_events(run) -> list[dict]:
    lines = (
        (run.bundle.path / "events.jsonl").read_text().splitlines()
        if (run.bundle.path / "events.jsonl").exists()
        else []
    )
    return [e for e in map(json.loads, lines) if e["event"].startswith("limit")]


def test_two_windows_behind_name_the_lock_budget_once_and_keeping_up_clears_it(tmp_path):
    lines: list[str] = []
    run = coordinator(tmp_path, lines)
    watch = LimitWatch(run)
    watch.see(window(2000, 2000, 100))
    watch.see(window(2000, 1180, 1700))  # one window behind: not yet
    assert watch.current is None and limit_events(run) == []
    for backlog in (3300, 4900, 6500):
        watch.see(window(2000, 1180, backlog))
    [told] = limit_events(run)
    assert (told["limit"], told["limitRate"], told["measured"], told["offered"]) == (
        "lock budget",
        1200.0,
        1180.0,
        2000.0,
    )
    assert told["limitInputs"]["busyPerPartition"] == 2 and told["allowed"] == {
        "lock budget": 1200.0,
        "processing capacity": 2400.0,
    }
    assert [line for line in lines if "limit:" in line] == [
        "-- limit: lock budget 100 / 52-record batches -> 2 of 4 consumers busy per partition x 200 msg/s x 3 "
        "partitions -> 1,200 msg/s (measured 1,180); levers: kafkaConfig.producerConfig.batch.size, "
        "groupConfig.share.partition.max.record.locks, kafkaConfig.shareConsumerConfig.share.acquire.mode"
    ]
    assert limit_status(watch.current) == {"limit": "lock budget", "limitInputs": told["limitInputs"]}
    assert run.bundle.run_info["limit"] == {
        "limit": "lock budget",
        "limitRate": 1200.0,
        "measured": 1180.0,
        "offered": 2000.0,
    }
    run.workload = run.workload.model_copy(update={"group_config": {"share.partition.max.record.locks": 400}})
    watch.see(window(2000, 1500, 6000))  # the window the change cut in two: no one setting's numbers
    assert watch.current is not None and len(limit_events(run)) == 1
    watch.see(window(2000, 2300, 5400))  # the live budget of 400: it catches up
    assert watch.current is None and [e["event"] for e in limit_events(run)] == ["limit", "limit_cleared"]
    assert run.bundle.run_info["limit"] is None  # as the run ends: its groups kept up
    assert limit_status(None) == {"limit": None, "limitInputs": None}


def test_a_shortfall_no_limit_explains_is_told_as_unexplained_with_what_each_allows(tmp_path):
    lines: list[str] = []
    run = coordinator(tmp_path, lines)
    watch = LimitWatch(run)
    for backlog in (1000, 2000, 3000):
        watch.see(window(2000, 700, backlog))
    [told] = limit_events(run)
    assert told["limit"] == "unexplained" and told["limitRate"] is None
    assert set(told["limitInputs"]) == {"lock budget", "processing capacity"}
    assert "consumption 700 msg/s of 2,000 offered is unexplained (lock budget allows 1,200" in lines[-1]


def test_the_measured_rate_is_the_settings_last_windows_together_not_one_fetch_more_or_less(tmp_path):
    """Whole fetches of 216 records in 2 s windows: one window counts 1, the next 3 (108 and 324 msg/s);
    over the setting's windows the group consumed 216 msg/s, and the limit (200) explains it."""
    run = coordinator(tmp_path, [], partitionsPerTopic=1, consumersPerGroup=4)
    run.aggregate = SimpleNamespace(
        producer_stats={"p0": (1.0, {"batch_records_avg": 216.0, "batch_bytes_avg": 24000.0})}
    )
    watch = LimitWatch(run)
    for cons in (216, 108, 324, 108):  # the first is the clients' start: not of the span
        watch.see(window(700, cons, 0))
    [told] = limit_events(run)
    assert (told["limit"], told["limitRate"], told["measured"]) == ("lock budget", 200.0, 216.0)  # 108 and 324
    assert watch.current is not None and watch.current.measured == 180.0  # and 108: told once, it still holds
    watch.see(window(700, 324, 0))
    assert watch.current is not None and watch.current.measured == 216.0


def test_a_binding_limit_that_moves_is_told_again(tmp_path):
    run = coordinator(tmp_path, [])
    watch = LimitWatch(run)
    for _ in range(3):
        watch.see(window(3000, 1190, 0))
    run.workload = run.workload.model_copy(update={"group_config": {"share.partition.max.record.locks": 150}})
    for _ in range(3):  # the first is cut in two by the change; then two windows behind
        watch.see(window(3000, 1800, 0))  # ceil(150 / 52) = 3 busy: 1,800 msg/s
    assert [e["limitRate"] for e in limit_events(run)] == [1200.0, 1800.0]


@pytest.mark.parametrize(
    ("keys", "phase"),
    [({"consumerType": "CONSUMER_GROUP"}, "measure"), ({}, "drain"), ({"consumersPaused": True}, "measure")],
)
def test_no_diagnosis_for_consumer_groups_outside_load_or_with_consumers_paused(tmp_path, keys, phase):
    run = coordinator(tmp_path, [], **keys)
    run.phase = phase
    watch = LimitWatch(run)
    for backlog in (1000, 2000, 3000):
        watch.see(window(2000, 700, backlog))
    assert watch.current is None and limit_events(run) == []


def test_the_budget_is_the_group_s_live_config_then_the_brokers_then_the_group_s_at_start():
    w = Workload.model_validate({"name": "w"})
    assert record_locks(w, {}, {}) == 2000
    assert record_locks(w, {}, {"share.partition.max.record.locks": "1000"}) == 1000
    assert (
        record_locks(
            w, {"group.share.partition.max.record.locks": "3000"}, {"share.partition.max.record.locks": "1000"}
        )
        == 3000
    )
    live = Workload.model_validate({"name": "w", "groupConfig": {"share.partition.max.record.locks": 400}})
    assert record_locks(live, {"group.share.partition.max.record.locks": "3000"}, {}) == 400


def test_explain_prints_the_run_s_diagnoses_in_order_and_as_json(tmp_path):
    run = coordinator(tmp_path, [])
    run.bundle.save_run_info()
    run.log.event("load_started", warmup_seconds=0, duration_seconds=60)
    watch = LimitWatch(run)
    for cons, backlog in ((0, 4000), (1180, 5000), (1180, 6000), (700, 7000), (2300, 5000)):  # the first: start-up
        watch.see(window(2000, cons, backlog))
    result = dimster("explain", str(run.bundle.path))
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith(": 2 diagnosis(es), from the start of load") and len(lines) == 4
    assert "lock budget 100 / 52-record batches" in lines[1] and "(measured 1,180)" in lines[1]
    assert (
        "unexplained: 1,020 msg/s of 2,000 offered (lock budget allows 1,200, processing capacity allows 2,400)"
        in lines[2]
    )
    assert lines[3].endswith("none: consumption keeps up")
    as_json = json.loads(dimster("explain", str(run.bundle.path), "--json").stdout)
    assert [d["limit"] if d["event"] == "limit" else None for d in as_json["diagnoses"]] == [
        "lock budget",
        "unexplained",
        None,
    ]
    assert all(d["atSeconds"] is not None and d["atSeconds"] >= 0 for d in as_json["diagnoses"])


def test_explain_of_a_folder_that_is_no_run_is_one_line(tmp_path):
    result = dimster("explain", str(tmp_path))
    assert result.code != 0 and "is not a run's results folder" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_shortfall_s_notes_name_short_producers_and_busy_brokers():
    """dimster's own wait is no note: a saturated worker is the load generator limit (diagnosis/generator.py)."""
    calm = {"workerWaitShare": 0.01, "targetRate": 2000.0, "pubRate10s": 1990.0}
    assert notes(calm, {1: 0.9, 2: 0.5}) == ()
    found = notes({"workerWaitShare": 0.25, "targetRate": 2000.0, "pubRate10s": 1500.0}, {1: 0.9, 2: 0.05})
    assert found == (
        "the producers sent 1,500 of the 2,000 msg/s targeted",
        "broker 2's request handlers were idle 5% of the last minute: the brokers may limit",
    )


def test_behind_is_judged_per_group_against_its_topic():
    """Two groups read one topic at 2,000 msg/s: 3,000 consumed in all is 1,500 each, behind."""
    w = window(2000, 3000, 0)
    assert is_behind(w, 0, 2, groups=2, topics=1) and not is_behind(w, 0, 2, groups=1, topics=1)
    assert not is_behind(window(2000, 3900, 0), 0, 2, groups=2, topics=1)
    assert is_behind(window(2000, 2000, 500), 0, 2, groups=1, topics=1)  # the backlog grew by 500 of 4,000
