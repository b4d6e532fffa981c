"""A load generator that cannot keep its schedule, named as such (diagnosis/generator.py): per window on
the coordinator, as the live diagnosis's limit, in run.json, and as `undecided` in the verdicts on
latencies and rates of a saturated measured phase."""

import json
import time

import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.control.console import warnings
from dimster.coordinator.loop.generator_watch import GeneratorWatch, window_phase
from dimster.diagnosis.generator import PUBLISH_DELAY_MS, WorkerLoad, console_line, saturated
from dimster.diagnosis.limits import GENERATOR, GroupInputs, diagnose
from dimster.metrics.histogram import Histogram
from dimster.report.data import RunData
from dimster.report.saturation import saturated_spans
from dimster.verdict.compare import Point, compare_verdict
from dimster.verdict.judge import judge_summary, outcome
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ClientInterval, IntervalReport, WakeLag, worker_report
from tests.held_clock import HeldClock

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("load", "reasons"),
    [
        (WorkerLoad(0, 5.0, waited=0.1, cpu=2.0, cores=2), []),  # 2 % waited, 0.4 of 2 cores: keeps up
        (WorkerLoad(0, 5.0, waited=1.15, cpu=2.0, cores=2), ["its threads waited 23% of the time to run"]),
        (WorkerLoad(1, 5.0, cpu=9.5, cores=2), ["its CPU at 1.9 of 2 cores"]),
        (WorkerLoad(2, 5.0, steal=1.5, cores=2), ["its host's steal time 15%"]),
        # producers 5 s late while the worker idles: their broker held them back (a restart), not dimster
        (WorkerLoad(3, 5.0, waited=0.2, cpu=0.7, cores=2, publish_delay_p99_ms=5233.0), []),
        (
            WorkerLoad(3, 5.0, steal=1.5, cores=2, publish_delay_p99_ms=PUBLISH_DELAY_MS),
            ["its host's steal time 15%", "its producers 50 ms behind schedule at p99"],
        ),
        (WorkerLoad(4, 0.0, waited=1.0, cpu=1.0), []),  # nothing covered: nothing to say
    ],
)
def test_a_worker_is_saturated_for_each_reason_and_says_which(load, reasons):
    assert load.reasons() == reasons
    assert saturated([load]) == ([load] if reasons else [])


def test_the_console_names_each_saturated_worker_and_the_levers():
    loads = [w.to_json() for w in saturated([WorkerLoad(0, 5.0, waited=1.2, cpu=9.0, cores=2)])]
    line = console_line(loads)
    assert line.startswith("the load generator is saturated (worker 0: its threads waited 24% of the time to run, ")
    assert "its CPU at 1.8 of 2 cores" in line and "--workers N" in line and "librdkafka" in line


def report(worker: int, end: float, waited_ms: float, cpu: float, delays_ms: tuple[float, ...] = ()) -> IntervalReport:
    histogram = Histogram()
    for ms in delays_ms:
        histogram.record(ms * 1000)
    producer = ClientInterval(f"p{worker}", "producer", "t")
    delays = HistogramColumns.gather([{("publish_delay", -1): histogram.to_wire()}])
    return worker_report(
        worker, end, [producer], cpu, wake_lag=WakeLag(500, waited_ms, 50.0), cores=2, histograms=delays
    )


def test_the_window_counts_a_workers_cpu_and_wait_only_for_the_time_after_load_started():
    """Worker 0's first report spans 10 s, 5 of them before load started, its CPU 9 s and its probe's
    wait 3 s: half of each is load's (4.5 s of CPU, 1.5 s of wait, 30 % as over the 10 s, not 60 %).
    (CI r115: the fake workers' 30 % came out as 32 % where load started after their report's span
    began; the wait was not scaled as the CPU was.)"""
    a = RunAggregate({"g": "t"})
    now = time.time()
    a.add(report(0, now - 10, 0.0, 0.0))  # before load
    a.load_started = now - 5
    a.add(report(0, now, 3000.0, cpu=9.0))
    [load] = a.window.loads()
    assert (load.seconds, round(load.cpu, 6), load.cores) == (pytest.approx(5.0), 4.5, 2)
    assert load.cpu_cores == pytest.approx(0.9)
    assert load.waited == pytest.approx(1.5) and load.wait_share == pytest.approx(0.3)


def test_a_plans_probe_names_the_workers_that_could_not_keep_their_schedule_over_its_step():
    """explore-limits judges a step with them (workload/modes/explore_limits.py): worker 1 waited 1.5
    of its 5 s, and its CPU at 1.9 of 2 cores; worker 0 kept up."""
    a = RunAggregate({"g": "t"})
    a.probing = True
    now = time.time()
    a.load_started = now - 5
    a.add(report(0, now, 50.0, 1.0))
    a.add(report(1, now, 1500.0, 9.5))
    [load] = a.take_probe().generator
    said = ["its threads waited 30% of the time to run", "its CPU at 1.9 of 2 cores"]
    assert load.worker == 1 and load.reasons() == said
    assert a.take_probe().generator == []  # the next step starts afresh


def test_a_window_names_the_workers_behind_schedule_and_the_watch_records_the_phase():
    """Worker 1 waited 1.5 of 5 s and its producers ran 200 ms late; worker 0 kept up. A window no
    report covered (a worker held from running reports late) leaves the watch's state as it was, and its
    time takes, in the phase's record, the state of the report that covers it."""
    a = RunAggregate({"g": "t"})
    now = time.time()
    a.load_started = now - 5
    a.add(report(0, now, 50.0, 1.0, (0.2, 0.3)))
    a.add(report(1, now, 1500.0, 2.0, (200.0,) * 10))
    window = a.take_window()
    assert [w["worker"] for w in window["generator"]] == [1]
    assert window["generator"][0]["reasons"] == [
        "its threads waited 30% of the time to run", "its producers 200 ms behind schedule at p99",
    ]  # fmt: skip

    class Log:
        def __init__(self):
            self.events = []

        def event(self, kind, **details):
            self.events.append((kind, details))

    class Bundle:
        def __init__(self):
            self.run_info = {}

    log, bundle = Log(), Bundle()
    watch = GeneratorWatch(log, bundle)  # type: ignore[arg-type]  # stand-ins of the run's log and bundle
    watch.see("measure", window)
    watch.see("measure", {"seconds": 1e-6, "generator": [], "workerWaitShare": None})  # no report: holds
    assert [kind for kind, _ in log.events] == ["generator_saturated"]
    watch.see("measure", {"seconds": 5.0, "generator": [], "workerWaitShare": 0.01})
    assert [kind for kind, _ in log.events] == ["generator_saturated", "generator_keeps_up"]
    measured = bundle.run_info["generator"]["measure"]
    assert (measured["seconds"], measured["saturated_seconds"], measured["saturated"]) == (10.0, 5.0, True)
    assert watch.saturated_phases() == ["measure"]
    # a worker held from running reports late: the windows without its report wait for the report that
    # covers them, and take its state in the phase's record (the console's state held meanwhile)
    for _ in range(3):
        watch.see("measure", {"seconds": 1.0, "generator": [], "workerWaitShare": None})
    assert [kind for kind, _ in log.events][-1] == "generator_keeps_up"
    assert bundle.run_info["generator"]["measure"]["saturated_seconds"] == 5.0
    watch.see("measure", window)
    assert [kind for kind, _ in log.events][-1] == "generator_saturated"
    measured = bundle.run_info["generator"]["measure"]
    assert (measured["seconds"], measured["saturated_seconds"]) == (13.0 + window["seconds"], 8.0 + window["seconds"])
    watch.see("drain", window)  # the drain's windows are load too: recorded under its own name
    assert bundle.run_info["generator"]["drain"]["saturated"] and "draining" not in bundle.run_info["generator"]


def test_a_window_across_warm_ups_end_gives_each_phase_its_own_seconds_and_takes_the_larger_ones_label():
    """A console window of ten 1-s reports, nine of warm-up and one of the measured phase (the line due
    as measure begins, as with a warm-up of whole windows): its label is warm-up's, and its time goes
    9 s to warm-up and 1 s to measure, where it once went whole to measure (10 s of warm-up counted as
    measured, and a measured phase longer than durationSeconds)."""
    a = RunAggregate({"g": "t"})
    start = time.time() - 10
    a.load_started = start
    for second in range(1, 11):
        a.add(report(0, start + second, 300.0, 0.5), "warmup" if second < 10 else "measure")  # waited 30 %
    window = a.take_window()
    assert window["phases"] == {"warmup": pytest.approx(9.0), "measure": pytest.approx(1.0)}
    assert window_phase("measure", window) == "warmup"
    assert window_phase("measure", {"seconds": 1.0, "phases": {}}) == "measure"  # no report: the loop's clock

    class Log:
        def event(self, kind, **details):
            pass

    bundle = type("Bundle", (), {"run_info": {}})()
    GeneratorWatch(Log(), bundle).see("measure", window)  # type: ignore[arg-type]
    recorded = bundle.run_info["generator"]
    assert recorded["warmup"]["seconds"] == recorded["warmup"]["saturated_seconds"] == pytest.approx(9.0)
    assert recorded["measure"]["seconds"] == recorded["measure"]["saturated_seconds"] == pytest.approx(1.0)


def test_a_window_names_each_live_worker_not_heard_from_and_its_line_says_its_clients_are_missing(monkeypatch):
    """A worker held from running (a CPU limit, a paused process) sends no report: a window without it
    reads low rates, so it says which live worker it lacks and since when; a lost worker is not live,
    and a worker not yet heard from is not overdue. On a clock the test holds: a thread of the niced
    unit tier may wait seconds for a CPU."""
    from dimster.coordinator.account import aggregate as aggregate_module

    clock = HeldClock(now=time.time())
    monkeypatch.setattr(aggregate_module, "time", clock)
    a = RunAggregate({"g": "t"})
    a.load_started = clock.now - 5
    for worker in (0, 1, 2):
        a.add(report(worker, clock.now, 50.0, 1.0, (0.2,)))
    assert a.take_window(live=[0, 1], overdue_after=0.0)["overdue"] == {}  # each reported in the window
    clock.now += 0.3
    a.add(report(1, clock.now, 50.0, 1.0, (0.2,)))  # worker 1 reports again; 0 does not; 2 was lost
    window = a.take_window(live=[0, 1, 3], overdue_after=0.2)
    assert window["overdue"] == {0: 0.3}
    [said] = [w for w in warnings("measure", window) if w.startswith("no report")]
    assert said.startswith("no report from worker 0 for 0.3 s: this line lacks its clients")
    assert a.take_window(live=[0, 1, 3])["overdue"] == {}  # by default none is due
    assert a.take_window(live=[0, 1, 3], overdue_after=60.0)["overdue"] == {}  # silent, not yet for long


def test_the_live_diagnosis_names_the_generator_where_no_kafka_limit_explains_the_rate():
    """The reference post's small workload on a busy host: processing would allow 4,800 msg/s, the
    group consumed 1,500 of 3,000, and worker 0's threads waited 23 %: the generator is the limit. Had
    the group consumed the 1,200 msg/s its lock budget allows (512-record batches, 100 locks), the
    budget would explain the rate: it stays the limit and the generator is a note."""
    inputs = GroupInputs(6, 24, 5.0, 1, 500, "batch_optimized", 100, 64.0, 12.0)
    worker = WorkerLoad(0, 5.0, waited=1.15, cpu=9.0, cores=2).to_json()
    d = diagnose(inputs, 1500.0, 3000.0, (), [worker])
    assert d.name == GENERATOR and d.limit is not None
    worker_said = "worker 0: its threads waited 23% of the time to run, its CPU at 1.8 of 2 cores"
    assert d.limit.sentence == f"the load generator: {worker_said}"
    assert "more workers (--workers N, or workers: N in the environment)" in d.limit.levers
    assert diagnose(inputs, 1500.0, 3000.0).name != GENERATOR  # without a saturated worker: the model's word
    budget = diagnose(inputs, 1200.0, 3000.0, (), [worker])
    assert budget.name == "lock budget" and budget.notes == (f"the load generator was saturated too ({worker_said})",)
    assert budget.limit is not None and "worker0WaitShare" not in budget.limit.inputs


SATURATED = {"generator": {"measure": {"seconds": 20.0, "saturated_seconds": 8.0, "saturated": True,
                                       "workers": {"0": {"saturated_seconds": 8.0, "wait_share_max": 0.31,
                                                         "cpu_cores": 1.7}}}},
             "latency_ms": {"e2e": {"p99": 40.0}}, "throughput": {"produced_msgs_per_s": 400.0},
             "totals": {"lost": 0}}  # fmt: skip


def test_thresholds_on_latencies_and_rates_of_a_saturated_phase_are_undecided_and_counts_still_judged():
    verdict = judge_summary(["e2e.p99 < 50ms", "produced.rate > 300 msg/s", "lost == 0"], SATURATED)
    assert verdict is not None and verdict["passed"] is False
    assert [r["passed"] for r in verdict["thresholds"]] == [None, None, True]
    note = verdict["thresholds"][0]["note"]
    assert note.startswith("undecided: the load generator was saturated for 40% of the measured phase; worker 0")
    insisted = judge_summary(["e2e.p99 < 50ms", "lost == 0"], SATURATED, judge_saturated=True)
    assert insisted is not None and insisted["passed"] is True  # saturatedPhases: judge


def test_an_undecided_threshold_is_said_undecided_in_the_report_and_skipped_in_junit():
    """Not `breached` (the run's figure may have held on a quiet host), not `held` either."""
    from dimster.report.verdict_panel import verdict_panel
    from dimster.results.junit import run_suite

    verdict = judge_summary(["e2e.p99 < 50ms", "lost == 0"], SATURATED)
    assert verdict is not None and outcome(verdict) == "undecided"
    html = verdict_panel({"verdict": verdict})
    assert '<span class="badge undecided">undecided</span>' in html and "breached" not in html
    assert '<span class="warn">undecided</span> (undecided: the load generator was saturated for 40%' in html
    cases = run_suite(verdict, {"workload": "w"}).cases
    assert [(c.outcome, c.message[:50]) for c in cases] == [
        ("skipped", "undecided: the load generator was saturated for 40"), ("passed", ""),
    ]  # fmt: skip
    lost = judge_summary(["e2e.p99 < 50ms", "lost == 0"], SATURATED | {"totals": {"lost": 3}})
    assert lost is not None and outcome(lost) == "failed"  # a count breached: failed, whatever else is undecided


def test_compare_says_undecided_for_latencies_and_rates_of_a_saturated_side(tmp_path, monkeypatch):
    quiet = Point("run", "{}", {"e2e.p99": [10.0], "lost": [0.0]}, {"e2e.p99": [10.0] * 20})
    busy = Point("run", "{}", {"e2e.p99": [2700.0], "lost": [1.0]}, {"e2e.p99": [2700.0] * 20}, "undecided: why")
    sides = {"base": quiet, "cand": busy}
    monkeypatch.setattr("dimster.verdict.compare.load_side", lambda folder: ("run", [sides[folder.name]]))
    result = compare_verdict(tmp_path / "base", tmp_path / "cand", {})
    rows = {f["figure"]: f for f in result["points"][0]["figures"]}
    assert (rows["e2e.p99"]["verdict"], rows["e2e.p99"]["reason"]) == ("undecided", "the candidate: undecided: why")
    assert rows["lost"]["verdict"] == "worse" and result["regression"]  # a count is an outcome: judged
    judged = compare_verdict(tmp_path / "base", tmp_path / "cand", {}, judge_saturated=True)
    assert {f["figure"]: f["verdict"] for f in judged["points"][0]["figures"]}["e2e.p99"] == "worse"


def test_the_latency_chart_shades_each_saturated_span_to_its_end_or_the_runs(tmp_path):
    at = {"load_started": 1000.0, "generator_saturated": 1010.0, "generator_keeps_up": 1020.0}
    events = [{"time": t, "event": e} for e, t in at.items()]
    events += [{"time": 1030.0, "event": "generator_saturated"}, {"time": 1040.0, "event": "run_ended"}]
    run = RunData(tmp_path, {"load_started": 1000.0}, {}, {}, {}, {"events": events})
    assert saturated_spans(run) == [(10.0, 20.0), (30.0, 40.0)]


def test_the_run_says_within_a_window_that_a_worker_fell_behind_and_records_the_phase(tmp_path):
    """The real coordinator loop over in-memory workers: worker 1's threads wait 30 % of the time."""
    from dimster.coordinator.loop.run import Coordinator
    from dimster.results.bundle import ResultsBundle
    from dimster.workload.model import Workload
    from tests.fake_run import FakeKafka, FakeLoadPlan, FakeWorkers, fake_cluster

    workers = FakeWorkers(waiting={1: 0.3})
    workload = Workload.model_validate(
        {"name": "w", "durationSeconds": 1.5, "reportIntervalSeconds": 0.5, "producersPerTopic": 2,
         "consumersPerGroup": 2, "drainTimeoutSeconds": 10, "warmupSeconds": 0}
    )  # fmt: skip
    bundle = ResultsBundle(tmp_path, workload.name)
    bundle.start(workload={"name": "w"}, environment={}, broker_config={}, kafka_version="4.4.0", run_id="r")
    lines: list[str] = []
    plan = FakeLoadPlan(workers)  # a pass that prints a line after the duration, however busy the host
    c = Coordinator(workload, fake_cluster(), bundle, workers, 2, say=lines.append, kafka=FakeKafka(workers), plan=plan)
    assert c.run() == 0
    measured = [line for line in lines if "measure]" in line]
    assert measured and all(
        "the load generator is saturated (worker 1: its threads waited 30%" in line for line in measured[1:]
    )  # fmt: skip  (the first window may have no report yet)
    events = [json.loads(line)["event"] for line in (bundle.path / "events.jsonl").read_text().splitlines()]
    assert events.index("generator_saturated") > events.index("load_started")
    info = json.loads((bundle.path / "run.json").read_text())
    assert info["generator"]["measure"]["saturated"] and set(info["generator"]["measure"]["workers"]) == {"1"}
