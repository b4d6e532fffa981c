"""The max-rate mode without Kafka: OMB's RateController cases (RateControllerTest.java) on the port,
and the plan steering a scripted run: ramp up while there is no backlog, cut on a receive or publish
backlog, end at warm-up + duration, and what it writes into run.json and the console."""

import pytest

from dimster.metrics.histogram import Histogram
from dimster.workload.model import parse_workload
from dimster.workload.modes import mode_line, plan_for
from dimster.workload.modes.base import Probe
from dimster.workload.modes.max_rate import MaxRate, MaxRatePlan, RateController

pytestmark = pytest.mark.unit


class OmbController:
    """OMB's interface over the port: running totals of records sent and received, a period in ns."""

    def __init__(self):
        self.port = RateController(MaxRate(type="max-rate"))
        self.published = self.received = 0

    def next_rate(self, rate: float, period_nanos: int, total_published: int, total_received: int) -> float:
        published, received = total_published - self.published, total_received - self.received
        self.published, self.received = total_published, total_received
        seconds = period_nanos / 1e9
        return self.port.next_rate(rate, seconds, published, received, total_published - total_received)[0]

    @property
    def ramping_factor(self) -> float:
        return self.port.factor


SECOND = 1_000_000_000


@pytest.mark.parametrize(
    ("case", "first", "second"),
    [  # RateControllerTest.java: rate 10,000, a period of one second; totals published, received -> rate, factor
        ("receiveBacklog", ((10_000, 10_000), 20_000, 1), ((20_000, 15_000), 5_000, 0.5)),
        ("publishBacklog", ((10_000, 10_000), 20_000, 1), ((15_000, 20_000), 5_000, 0.5)),
        ("rampUp", ((10_000, 5_000), 5_000, 0.5), ((20_000, 20_000), 10_000, 1)),
    ],
)
def test_omb_rate_controller_cases(case, first, second):
    controller, rate = OmbController(), 10_000.0
    assert controller.ramping_factor == 1
    for (published, received), expected_rate, expected_factor in (first, second):
        rate = controller.next_rate(rate, SECOND, published, received)
        assert (rate, controller.ramping_factor) == (expected_rate, expected_factor)


def test_the_ramping_factor_stays_within_its_bounds_and_the_limits_are_settings():
    controller = RateController(MaxRate(type="max-rate", minRampingFactor=0.1, receiveBacklogLimit=50))
    for _ in range(10):
        rate, why = controller.next_rate(1000, 1, 1000, 900, 100)
    assert why == "receive backlog" and controller.factor == 0.1 and rate == 900
    assert controller.next_rate(1000, 1, 1000, 1000, 50) == (1200, "no backlog")  # at the limit: no cut
    assert controller.factor == 0.2
    # consumers kept pace this period, but 8,000 records are still behind: the rate less that backlog
    assert controller.next_rate(10_000, 1, 10_000, 10_000, 8000) == (2000, "receive backlog")
    # producers sent 9,500 records in 2 s at 10,000 msg/s: their own pace (the rate less the shortfall is the same)
    assert controller.next_rate(10_000, 2, 9500, 9500, 0) == (4750, "publish backlog")


class ScriptedRun:
    """The numbers a plan reads, set by the test: each control step's probe and the backlog."""

    def __init__(self):
        self.load_started = 1000.0
        self.backlog = 0
        self.probe = Probe(0, 0.0, 0.0, 0.0, Histogram())
        self.probes_taken = 0

    def take_probe(self) -> Probe:
        probe, self.probe = self.probe, Probe(0, 0.0, 0.0, 0.0, Histogram())
        self.probes_taken += 1
        return probe


def period(seconds: float, acked: float, consumed: float) -> Probe:
    return Probe(seconds, acked, consumed, max(0.0, acked - consumed), Histogram(), acked=acked)


def max_rate_workload(**top):
    return parse_workload({"name": "x", "warmupSeconds": 6, "durationSeconds": 30, "mode": "max-rate", **top}, "t")


def test_max_rate_ramps_up_cuts_on_each_backlog_and_ends_at_warmup_plus_duration():
    workload = max_rate_workload()
    plan, run = plan_for(workload), ScriptedRun()
    assert isinstance(plan, MaxRatePlan)
    start = plan.step(0, workload, run)
    assert start.sets == [("producerRate", "10000")] and run.probes_taken == 1 and not start.done
    assert plan.step(2.9, workload, run).sets == [] and run.probes_taken == 1  # not a control step yet
    assert plan.step(3, workload, run).sets == [] and len(plan.steps) == 0  # no report: looks again
    run.probe = period(3, acked=10_000, consumed=10_000)
    assert plan.step(3.1, workload, run).sets == [("producerRate", "20000")]  # no backlog: doubled
    run.probe, run.backlog = period(3, acked=20_000, consumed=15_000), 15_000  # consumers fell behind
    assert plan.step(6.1, workload, run).sets == [("producerRate", "15000")]  # their pace; factor halved
    assert plan.controller.factor == 0.5
    run.probe, run.backlog = period(3, acked=15_000, consumed=15_000), 0
    assert plan.step(9.1, workload, run).sets == [("producerRate", "30000")]  # factor doubled back to 1
    run.probe = period(3, acked=20_000, consumed=20_000)  # producers fell short of 30,000 msg/s
    assert plan.step(12.1, workload, run).sets == [("producerRate", "20000")]
    assert [s["reason"] for s in plan.steps] == ["no backlog", "receive backlog", "no backlog", "publish backlog"]
    assert plan.steps[1] == {
        "at": 6.1, "rate": 15000.0, "reason": "receive backlog", "published": 60000, "consumed": 45000,
        "backlog": 15000,
    }  # fmt: skip
    run.probe = period(3, acked=20_000, consumed=20_000)
    assert plan.step(15.1, workload, run).sets == [("producerRate", "40000")]  # factor 0.5 doubled to 1
    assert not plan.step(35.9, workload, run).done  # no report since: nothing changes
    end = plan.step(36, workload, run)  # warm-up 6 s + duration 30 s
    assert end.done and end.sets == []
    result = plan.result()
    assert result["final_rate_msgs_per_s"] == 40_000 and result["adjustments"] == 5 and result["step_count"] == 5


def test_max_rate_sets_the_rate_only_when_it_moves_by_one_percent():
    mode = {"type": "max-rate", "startRate": 1000, "maxRampingFactor": 0.004, "minRampingFactor": 0.001}
    workload = max_rate_workload(mode=mode)
    plan, run = plan_for(workload), ScriptedRun()
    plan.step(0, workload, run)
    for t in (3, 6):  # +0.4 % each: 1004, then 1008.016, under 1 % above the 1000 set
        run.probe = period(3, acked=plan.rate, consumed=plan.rate)
        assert plan.step(t, workload, run).sets == []
    assert plan.rate == pytest.approx(1008.016)
    run.probe = period(3, acked=plan.rate, consumed=plan.rate)
    assert plan.step(9, workload, run).sets == [("producerRate", "1012.05")]
    assert plan.result()["adjustments"] == 1 and len(plan.steps) == 3


def test_a_rate_cut_to_nothing_stays_at_one_message_a_second():
    workload = max_rate_workload()
    plan, run = plan_for(workload), ScriptedRun()
    plan.step(0, workload, run)
    run.probe, run.backlog = period(3, acked=0, consumed=0), 50_000
    assert plan.step(3, workload, run).sets == [("producerRate", "1")]
    run.probe, run.backlog = period(3, acked=1, consumed=1), 0
    assert plan.step(6, workload, run).sets == [("producerRate", "2")]  # climbs back (OMB's would stay at 0)


def test_the_mean_rate_covers_the_measured_phase_only_and_the_line_says_the_end():
    workload = max_rate_workload(mode={"type": "max-rate", "startRate": 100})
    plan, run = plan_for(workload), ScriptedRun()
    plan.step(0, workload, run)
    run.probe = period(3, acked=100, consumed=100)
    plan.step(3, workload, run)  # 200 from 3 s
    run.probe = period(3, acked=200, consumed=200)
    plan.step(16, workload, run)  # 400 from 16 s
    done = plan.step(36, workload, run)
    result = plan.result()
    # measured from 6 s to 36 s: 10 s at 200 msg/s, 20 s at 400
    assert result["mean_rate_msgs_per_s"] == pytest.approx((10 * 200 + 20 * 400) / 30, abs=0.1)
    assert result["type"] == "max-rate" and result["start_rate_msgs_per_s"] == 100 and result["step_count"] == 2
    assert [s["rate"] for s in result["steps"]] == [200, 400]
    assert mode_line(result) == "max-rate: 400 msg/s at the end (2 adjustments)"
    assert done.note == "400 msg/s at the end (2 adjustments), 333 on average"


def test_a_run_stopped_during_warm_up_has_no_mean_and_a_duration_of_zero_never_ends():
    workload = max_rate_workload(durationSeconds=0)
    plan, run = plan_for(workload), ScriptedRun()
    plan.step(0, workload, run)
    assert plan.result()["mean_rate_msgs_per_s"] is None and plan.result()["adjustments"] == 0
    assert not plan.step(10_000, workload, run).done


def test_max_rate_refuses_a_rate_schedule_and_a_run_without_consumers():
    with pytest.raises(Exception, match="mode max-rate sets the producer rate itself"):
        max_rate_workload(producerRateSchedule={"segments": [{"rate": 10, "durationSeconds": 5}]})
    with pytest.raises(Exception, match="mode max-rate needs producers and consumers"):
        max_rate_workload(consumersPerGroup=0)
    with pytest.raises(Exception, match="minRampingFactor <= maxRampingFactor"):
        max_rate_workload(mode={"type": "max-rate", "minRampingFactor": 0.5, "maxRampingFactor": 0.1})
