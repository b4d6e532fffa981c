"""Run plans without Kafka: the rate search, the drain rules and each plan's sequence of live changes,
driven by a scripted view of the run (the numbers a real run's aggregate would show)."""

import pytest

from dimster.diagnosis.generator import WorkerLoad
from dimster.metrics.histogram import Histogram
from dimster.workload.model import parse_workload
from dimster.workload.modes import plan_for
from dimster.workload.modes.base import Drain, Probe, ReceiveSpan
from dimster.workload.modes.drain_backlog import DrainBacklogPlan
from dimster.workload.modes.explore_limits import ExploreLimitsPlan, RateSearch

pytestmark = pytest.mark.unit


def search_for(capacity: float, start: float = 100, confirm: bool = True, passes=None) -> RateSearch:
    """Run a search against a verdict function: a rate passes when it is at most `capacity`."""
    search = RateSearch(start, 2, 0.05, 1, 1_000_000, confirm)
    passes = passes or (lambda rate: rate <= capacity)
    for _ in range(60):
        rate = search.next_rate()
        if rate is None:
            return search
        search.record(rate, passes(rate))
    raise AssertionError("the search did not end")


@pytest.mark.parametrize("capacity", [150, 800, 813, 5000, 64_000])
def test_the_rate_search_converges_on_the_capacity(capacity):
    search = search_for(capacity)
    assert search.limit <= capacity < search.lowest_failed
    assert search.lowest_failed / search.limit - 1 <= 0.05
    assert sum(1 for r, ok in search.verdicts if r == search.limit and ok) == 2  # confirmed


def test_a_start_above_the_capacity_comes_down():
    search = search_for(300, start=10_000)
    assert search.limit <= 300 < search.lowest_failed
    assert search.verdicts[0] == (10_000, False) and search.verdicts[1] == (5_000, False)


def test_a_lucky_pass_is_caught_by_its_confirmation():
    seen = set()

    def flaky(rate):  # 900 passes the first time only; the capacity is 800
        if rate == 900 and rate not in seen:
            seen.add(rate)
            return True
        return rate <= 800

    search = RateSearch(900, 2, 0.05, 1, 1_000_000, True)
    while (rate := search.next_rate()) is not None:
        search.record(rate, flaky(rate))
    assert search.limit <= 800 and (900, True) in search.verdicts and (900, False) in search.verdicts


def test_without_anything_passing_the_search_stops_at_the_minimum():
    search = RateSearch(100, 2, 0.05, 10, 1000, True)
    while (rate := search.next_rate()) is not None:
        search.record(rate, False)
    assert search.limit is None and min(r for r, _ in search.verdicts) == 10


def test_a_drain_ends_drained_stalled_or_timed_out():
    drain = Drain(started=0, backlog=1000, stall_seconds=5, timeout_seconds=60)
    assert drain.outcome(1, 600) is None and drain.outcome(2, 0) == "drained"
    plateau = Drain(started=0, backlog=1000, stall_seconds=5, timeout_seconds=60)
    assert plateau.outcome(1, 400) is None
    assert [plateau.outcome(t, 400) for t in (2, 4, 5.9)] == [None, None, None]
    assert plateau.outcome(6, 400) == "stalled"  # no progress for 5 s: ends, never hangs
    slow = Drain(started=0, backlog=10_000, stall_seconds=5, timeout_seconds=10)
    assert all(slow.outcome(t, 10_000 - t) is None for t in range(1, 10))
    assert slow.outcome(10, 9_990) == "timed out"


class ScriptedRun:
    """The numbers a plan reads, set by the test."""

    def __init__(self):
        self.load_started = 1000.0
        self.backlog = 0
        self.probe = Probe(0, 0.0, 0.0, 0.0, Histogram())
        self.span = ReceiveSpan()
        self.marked = 0

    def take_probe(self) -> Probe:
        probe, self.probe = self.probe, Probe(0, 0.0, 0.0, 0.0, Histogram())
        return probe

    def mark_receiving(self) -> None:
        self.marked += 1

    def receiving(self) -> ReceiveSpan:
        return self.span


def judged(seconds: float, sent: int, received: int, e2e_ms: float, waited: float | None = None) -> Probe:
    e2e = Histogram()
    for _ in range(received):
        e2e.record(e2e_ms * 1000)
    return Probe(seconds, sent / seconds, received / seconds, max(0.0, (sent - received) / seconds), e2e, waited)


def explore_workload(**mode):
    settings = {"type": "explore-limits", "targetE2eP99Ms": 100, "startRate": 400, "settleSeconds": 2}
    return parse_workload(
        {"name": "x", "consumerProcMsMin": 5, "consumerProcMsMax": 5, "mode": {**settings, "stepSeconds": 10, **mode}},
        "t",
    )


def test_explore_limits_settles_judges_drains_and_restores_processing():
    workload = explore_workload()
    plan = plan_for(workload)
    assert isinstance(plan, ExploreLimitsPlan)
    run = ScriptedRun()
    first = plan.step(0, workload, run)
    assert first.sets == [("producerRate", "400")]
    assert plan.step(1, workload, run).sets == []  # settling
    plan.step(2, workload, run)  # judging starts
    run.probe = judged(10, 4000, 4000, e2e_ms=20)
    for t in range(3, 12):
        assert plan.step(t, workload, run).sets == []
    run.backlog = 30
    verdict = plan.step(12, workload, run)
    assert verdict.sets == [("producerRate", "0"), ("consumerProcMsMin", "0"), ("consumerProcMsMax", "0")]
    assert "pass" in verdict.note
    assert plan.steps[0]["passed"] and plan.steps[0]["e2e_p99_ms"] == pytest.approx(20, rel=0.02)
    run.backlog = 0
    after_drain = plan.step(13, workload, run)
    assert after_drain.sets[0] == ("producerRate", "800") and ("consumerProcMsMin", "5") in after_drain.sets
    assert after_drain.evidence["drain"]["outcome"] == "drained" and after_drain.evidence["rate"] == 400


def test_explore_limits_fails_a_step_on_latency_backlog_or_pace_and_says_why():
    workload = explore_workload(startRate=1000)
    plan, run = plan_for(workload), ScriptedRun()
    plan.step(0, workload, run)
    plan.step(2, workload, run)
    run.probe = judged(10, 9000, 8000, e2e_ms=400)  # 900 of 1000 msg/s, 800 consumed, p99 over 100 ms
    for t in range(3, 12):
        run.backlog = 100 * t  # grows 100 msg/s
        plan.step(t, workload, run)
    verdict = plan.step(12, workload, run)
    reasons = plan.steps[0]["reasons"]
    assert not plan.steps[0]["passed"] and "fail" in verdict.note
    assert any("producers reached 900" in r for r in reasons)
    assert any("e2e p99" in r for r in reasons)
    assert any("consumers fell behind: the backlog grew 100 msg/s" in r for r in reasons)
    assert plan.steps[0]["backlog_growth_msgs_per_s"] > 0  # kept as evidence


def test_a_drain_that_stalls_ends_the_search_with_a_verdict_and_restores_processing():
    workload = explore_workload(startRate=1000, drainStallSeconds=5)
    plan, run = plan_for(workload), ScriptedRun()
    plan.step(0, workload, run)
    plan.step(2, workload, run)
    run.probe = judged(10, 10_000, 10_000, e2e_ms=500)
    run.backlog = 5000
    plan.step(12, workload, run)
    for t in range(13, 17):
        assert plan.step(t, workload, run).sets == []
    ended = plan.step(17, workload, run)
    assert ended.done and ended.evidence["drain"]["outcome"] == "stalled"
    assert ended.sets == [("consumerProcMsMin", "5"), ("consumerProcMsMax", "5")]
    assert plan.result()["verdict"] == "stopped: the drain after step 1 stalled at a backlog of 5,000"


def test_the_processing_time_restored_is_the_one_in_force_when_the_drain_began():
    workload = explore_workload()
    plan, run = plan_for(workload), ScriptedRun()
    plan.step(0, workload, run)
    plan.step(2, workload, run)
    changed = workload.model_copy(update={"consumer_proc_ms_min": 7.0, "consumer_proc_ms_max": 9.0})  # a --modify
    run.probe = judged(10, 4000, 4000, e2e_ms=20)
    plan.step(12, changed, run)
    after_drain = plan.step(13, changed.model_copy(update={"consumer_proc_ms_min": 0, "consumer_proc_ms_max": 0}), run)
    assert after_drain.sets[1:] == [("consumerProcMsMin", "7"), ("consumerProcMsMax", "9")]


def test_a_midpoint_that_rounds_onto_a_bound_ends_the_search():
    search = RateSearch(1000, 2, 0.0001, 1, 1_000_000, False)
    search.record(1000, True)
    search.record(1001, False)
    assert search.next_rate() is None and search.limit == 1000


def explore_to_the_end(waited_at: dict[float, float] | None = None, saturated_at=None, confirm=False) -> dict:
    """An explore-limits search against a system that holds 1000 msg/s (10 ms p99 up to it, 900 ms
    above), a worker's threads waiting `waited_at[rate]` of each step (0.02 otherwise); a step at a
    rate of `saturated_at` takes the next of its wait shares as a saturated generator's (None: not
    saturated), its p99 then 900 ms whatever the rate; its result."""
    workload = explore_workload(startRate=800, precision=0.3, confirm=confirm)
    plan, run = plan_for(workload), ScriptedRun()
    t, step = 0.0, plan.step(0, workload, run)
    while not step.done:
        t += 1
        if plan.stage == "judge" and run.probe.seconds == 0:
            rate = plan.rate
            shares = (saturated_at or {}).get(rate) or []
            share = shares.pop(0) if shares else None
            e2e_ms, waited = (10 if rate <= 1000 and share is None else 900), (waited_at or {}).get(rate, 0.02)
            run.probe = judged(10, int(rate * 10), int(min(rate, 1000) * 10), e2e_ms=e2e_ms, waited=waited)
            if share is not None:
                run.probe.generator = [WorkerLoad(0, 10.0, waited=10.0 * share)]
        step = plan.step(t, workload, run)
    return plan.result()


def test_explore_limits_ends_with_the_limit_and_its_evidence():
    result = explore_to_the_end()
    assert result["limit_msgs_per_s"] == 1000 and result["lowest_failed_msgs_per_s"] == 1200
    assert result["verdict"] == "limit 1000 msg/s (failed at 1200)"
    assert [s["rate"] for s in result["steps"]] == [800, 1600, 1200, 1000]


def test_a_limit_whose_failed_steps_waited_on_the_worker_says_so():
    """The steps above 1000 msg/s fail while a worker's threads wait to run 40 % (1600) and 5 % (1200)
    of the step: the verdict names the one over 10 %, and each step keeps its share as evidence."""
    result = explore_to_the_end({1600: 0.4, 1200: 0.05})
    assert [s["worker_wait_share"] for s in result["steps"]] == [0.02, 0.4, 0.05, 0.02]
    assert result["verdict"] == (
        "limit 1000 msg/s (failed at 1200); in 1 of the failed steps a worker's threads waited to run (up to 40% "
        "of the step): the limit may be the workers', not Kafka's; spread the clients over more workers or hosts"
    )


def test_a_step_failed_while_the_generator_was_saturated_is_undecided_and_tried_again():
    """At 1600 msg/s the consumers fall 600 msg/s behind (37 % of the rate) while a worker's threads
    wait 40 % of the step: dimster's wait may be why, so the step is undecided and the rate tried
    again; saturated twice, the search stops there, the limit so far its last pass."""
    twice = explore_to_the_end(saturated_at={1600: [0.4, 0.4]})
    assert [(s["rate"], s["passed"]) for s in twice["steps"]] == [(800, True), (1600, None), (1600, None)]
    assert twice["steps"][1]["generator"][0]["reasons"] == ["its threads waited 40% of the time to run"]
    assert twice["verdict"] == (
        "stopped: the load generator was saturated at 1600 msg/s twice (worker 0: its threads waited 40% of "
        "the time to run); the limit so far 800 msg/s"
    )
    assert twice["lowest_failed_msgs_per_s"] is None  # nothing failed that Kafka answered for
    once = explore_to_the_end(saturated_at={1600: [0.4]})  # kept up when tried again: failed, and on
    assert [(s["rate"], s["passed"]) for s in once["steps"]] == [
        (800, True), (1600, None), (1600, False), (1200, False), (1000, True),
    ]  # fmt: skip
    assert once["verdict"] == "limit 1000 msg/s (failed at 1200)"
    beyond = explore_to_the_end(saturated_at={1600: [0.1]})  # 10 % of 1600 cannot hide 600 msg/s
    assert [(s["rate"], s["passed"]) for s in beyond["steps"]][:2] == [(800, True), (1600, False)]
    assert beyond["steps"][1]["generator"] and beyond["limit_msgs_per_s"] == 1000


def test_a_search_stopped_while_confirming_its_limit_says_the_limit_is_not_confirmed():
    """1000 msg/s passes, and its confirmation is undecided twice (the generator saturated): the search
    stops with 1000 as the limit so far, saying it passed once and was never confirmed."""
    result = explore_to_the_end(saturated_at={1000: [None, 0.4, 0.4]}, confirm=True)
    assert [(s["rate"], s["passed"]) for s in result["steps"]] == [
        (800, True), (1600, False), (1200, False), (1000, True), (1000, None), (1000, None),
    ]  # fmt: skip
    assert result["limit_msgs_per_s"] == 1000
    assert result["verdict"].endswith("; the limit so far 1000 msg/s (passed once, not confirmed)")


def drain_workload(**mode):
    return parse_workload(
        {"name": "x", "messageSize": 100, "mode": {"type": "drain-backlog", "drainStallSeconds": 5, **mode}}, "t"
    )


def test_drain_backlog_pauses_builds_resumes_and_times_the_drain():
    workload = drain_workload(backlogRecords=5000)
    plan, run = plan_for(workload), ScriptedRun()
    assert isinstance(plan, DrainBacklogPlan)
    assert plan.step(0, workload, run).sets == [("consumersPaused", "true")]
    run.backlog = 4999
    assert plan.step(4, workload, run).sets == []
    run.backlog = 5100
    resume = plan.step(5, workload, run)
    assert resume.sets == [("producerRate", "0"), ("consumersPaused", "false")] and run.marked == 1
    run.backlog = 2000
    assert not plan.step(6, workload, run).done
    run.backlog = 0
    run.span = ReceiveSpan(received=5100, first=1005.5, last=1007.5)  # epoch s: load started at 1000
    done = plan.step(8, workload, run)
    assert done.done
    result = plan.result()
    assert result["drained"] and result["backlog"] == 5100
    assert result["drain_seconds"] == pytest.approx(2.5)  # resumed at 1005, last record at 1007.5
    assert result["first_record_seconds"] == pytest.approx(0.5)
    assert result["drain_msgs_per_s"] == pytest.approx(2550)


def test_drain_backlog_in_bytes_and_a_plateau_ends_with_a_verdict():
    workload = drain_workload(backlogBytes=100_000, residualRate=50)
    plan, run = plan_for(workload), ScriptedRun()
    assert plan.target == 1000  # 100 kB of 100-byte records
    plan.step(0, workload, run)
    run.backlog = 1000
    assert plan.step(1, workload, run).sets == [("producerRate", "50"), ("consumersPaused", "false")]
    run.backlog = 700
    for t in range(2, 7):
        assert not plan.step(t, workload, run).done
    ended = plan.step(7, workload, run)
    assert ended.done and plan.result()["outcome"] == "stalled" and not plan.result()["drained"]
    assert plan.result()["backlog_left"] == 700 and "700 records left" in ended.note


def test_drain_backlog_defaults_pause_at_once_empty_at_two_seconds_of_residual_load_and_end_when_drained():
    workload = drain_workload(backlogRecords=1000, residualRate=50).model_copy(update={"warmup_seconds": 10.0})
    plan, run = plan_for(workload), ScriptedRun()
    assert plan.step(0, workload, run).sets == [("consumersPaused", "true")]  # warm-up or not
    run.backlog = 1000
    plan.step(1, workload, run)
    run.backlog = 101
    assert not plan.step(2, workload, run).done
    run.backlog = 100  # floor(2 x 50 msg/s)
    assert plan.step(3, workload, run).done and plan.result()["drained"]


def draining(workload):
    """A drain-backlog plan whose backlog is built (at step 1) and drains, and its scripted run."""
    plan, run = plan_for(workload), ScriptedRun()
    plan.step(0, workload, run)
    run.backlog = plan.target
    assert plan.step(1, workload, run).sets[-1] == ("consumersPaused", "false")
    return plan, run


def test_drain_backlog_empty_at_records_ends_the_drain_at_that_backlog():
    workload = drain_workload(backlogRecords=5000, residualRate=50, emptyAtRecords=1000)
    plan, run = draining(workload)
    run.backlog = 1001
    assert not plan.step(2, workload, run).done
    run.backlog = 1000
    done = plan.step(3, workload, run)
    assert done.done and plan.result()["outcome"] == "drained" and plan.result()["backlog_left"] == 1000


def test_drain_backlog_after_drain_seconds_keeps_the_load_going_after_a_drained_drain_only():
    workload = drain_workload(backlogRecords=1000, residualRate=10, afterDrainSeconds=60)
    plan, run = draining(workload)
    run.backlog = 0
    drained = plan.step(5, workload, run)
    assert not drained.done and drained.evidence["outcome"] == "drained"
    assert drained.note.endswith("load goes on for 60 s") and plan.result()["drained"]
    assert not plan.step(64.9, workload, run).done and plan.step(64.9, workload, run).sets == []
    assert plan.step(65, workload, run).done
    stalled_workload = drain_workload(backlogRecords=1000, afterDrainSeconds=60)
    stalled, run = draining(stalled_workload)
    run.backlog = 700
    stalled.step(2, stalled_workload, run)
    assert stalled.step(7, stalled_workload, run).done and stalled.result()["outcome"] == "stalled"


def test_drain_backlog_build_after_warmup_pauses_once_warm_up_is_over_and_times_the_build_from_there():
    workload = drain_workload(backlogRecords=1000, buildAfterWarmup=True, buildTimeoutSeconds=20)
    workload = workload.model_copy(update={"warmup_seconds": 30.0})
    plan, run = plan_for(workload), ScriptedRun()
    assert [plan.step(t, workload, run).sets for t in (0, 10, 29.9)] == [[], [], []]
    assert plan.stage == "start"
    assert plan.step(30, workload, run).sets == [("consumersPaused", "true")]
    run.backlog = 500
    assert plan.step(49.9, workload, run).sets == []  # 19.9 s into the build: not timed out yet
    resumed = plan.step(50, workload, run)
    assert resumed.sets == [("producerRate", "0"), ("consumersPaused", "false")]
    assert "buildTimeoutSeconds reached at 500 records" in resumed.note
