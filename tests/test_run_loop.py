"""The coordinator's loop through the Workers seam, driven by in-memory workers and cluster: phases,
drain, live resize, plans and paused consumers (failures: test_run_failures; what it shows while it
runs: test_run_observers)."""

import gc
import json
import time

import pyarrow.parquet as pq
import pytest

from dimster.coordinator.account.self_cost import COLLECT_EVERY
from dimster.coordinator.loop import phases as phases_module
from dimster.coordinator.loop.phases import RunPhases
from dimster.errors import DimsterError
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.protocol import (
    AddClients,
    RemoveClients,
    RestartConsumers,
    StartLoad,
    Update,
    worker_report,
)
from dimster.workload.modes.base import PlanStep
from tests.fake_run import FakeWorkers, coordinator, events
from tests.held_clock import HeldClock

pytestmark = pytest.mark.unit


def test_phases_in_order_and_every_record_accounted(tmp_path, monkeypatch):
    """The load lasts its duration and at least two of the fake's steps (FakeLoadPlan), each written as
    a part of its own: several parts a table, however few passes a busy host let the loop make."""
    monkeypatch.setattr("dimster.coordinator.account.intake.FLUSH_EVERY", 0.0)  # a part every loop pass
    workers = FakeWorkers(steps_needed=2)
    c = coordinator(tmp_path, workers)
    printed_in: list[str] = []  # the phase of the run at each status line
    print_line = c._print_line

    def print_and_note() -> None:
        printed_in.append(c.phase)
        print_line()

    c._print_line = print_and_note  # type: ignore[method-assign]
    assert c.run() == 0
    kinds = [e["event"] for e in events(c)]
    order = ["worker_started", "consumers_assigned", "load_started", "stopping", "drain_started", "drain_ended"]
    assert [k for k in kinds if k in order] == ["worker_started", "worker_started", *order[1:]]
    assert kinds[-1] == "run_ended"
    totals = json.loads((c.bundle.path / "run.json").read_text())["totals"]
    assert totals["sent"] > 0 and totals["received"] == totals["acked"] == totals["sent"]
    assert totals["lost"] == 0 and totals["unconsumed"] == 0
    e2e = json.loads((c.bundle.path / "run.json").read_text())["e2e_ms"]
    assert e2e["count"] == totals["received"] and e2e["p50"] == pytest.approx(5.0, rel=0.02)
    assert e2e["max"] == pytest.approx(5.0, rel=0.02)  # warm-up's latencies are left out
    # load starts once on each worker, producers stop before any worker closes
    sent = [type(m).__name__ for _, m in workers.sent]
    assert sent.count("StartLoad") == 2 and sent.index("StopProducers") < sent.index("Close")
    assert c.kafka.deleted == c.topology.topics
    cost = json.loads((c.bundle.path / "run.json").read_text())["coordinator"]
    assert cost["report_lag_ms"]["count"] == workers.reports_under_load > 0  # one lag per report under load
    status_lines = [line for line in (c.bundle.path / "console.log").read_text().splitlines() if line.startswith("[")]
    assert len(status_lines) == len(printed_in)
    # one lag per line printed while load ran; a line of the stop's waits (a busy host's) has none
    assert cost["console_lag_ms"]["count"] == sum(phase in ("warmup", "measure") for phase in printed_in) > 0
    assert cost["cpu_seconds"] >= 0 and 0 <= cost["cpu_share_of_one_core"] < 2
    # the run's end merged each table's parts into one file, which holds every report
    tables = sorted((c.bundle.path / "metrics").iterdir())
    assert [t.name for t in tables] == ["histograms", "intervals", "workers"]
    assert [[p.name[:12] for p in t.iterdir()] for t in tables] == [["parts-00000-"]] * 3, tables
    rows = pq.read_table(next((c.bundle.path / "metrics" / "intervals").iterdir()))
    assert sum(rows.column("sent").to_pylist()) == totals["sent"]


def test_the_run_collects_cycles_less_often_and_gives_the_collectors_setting_back(tmp_path):
    """The loop makes and drops many small containers a report: its collector's youngest generation
    waits for COLLECT_EVERY allocations while the run goes on, also one that fails."""
    seen = []

    class Watching(FakeWorkers):
        def receive(self, timeout: float, doorbell: int | None = None):
            seen.append(gc.get_threshold()[0])
            return super().receive(timeout)

    before = gc.get_threshold()
    assert coordinator(tmp_path / "a", Watching()).run() == 0
    assert set(seen) == {COLLECT_EVERY} and gc.get_threshold() == before
    failing = Watching()
    failing.receive = lambda timeout, doorbell=None: 1 / 0  # type: ignore[method-assign]
    with pytest.raises(ZeroDivisionError):
        coordinator(tmp_path / "b", failing).run()
    assert gc.get_threshold() == before


def held_phases_clock(monkeypatch) -> HeldClock:
    """The phases' wall clock, held at now: a thread of the niced unit tier may wait seconds for a CPU,
    and phases laid out from now on the real clock (a warm-up of 10 s) would begin while it waits."""
    clock = HeldClock(now=time.time())
    monkeypatch.setattr(phases_module, "time", clock)
    return clock


def test_a_report_that_ends_after_warm_up_is_written_as_measured_before_the_loop_switches(monkeypatch):
    base = held_phases_clock(monkeypatch).now
    phases = RunPhases()
    phases.start_load(base - 0.2, 10.0, base)  # measure from base + 10, known at load start
    assert phases.now == "warmup"
    ends = (base + 5, base + 9.99, base + 10, base + 11)
    assert [phases.of_report(end, now=base + 9.5) for end in ends] == ["warmup", "warmup", "measure", "measure"]
    phases.enter("drain", at=base + 30)
    assert phases.of_report(base + 5, now=base + 31) == "drain"  # a late clock's report stays where the run is


def test_a_reading_goes_under_the_phase_it_was_taken_in_and_a_stop_in_warm_up_never_measures(monkeypatch):
    base = held_phases_clock(monkeypatch).now
    phases = RunPhases()
    assert phases.at(base - 50) == "starting" and phases.now == "starting"
    phases.start_load(base - 1, 10.0, base)
    phases.enter("drain", at=base + 22)
    taken = (base - 2, base - 1, base + 9.9, base + 10, base + 21.9, base + 22, base + 200)
    assert [phases.at(at) for at in taken] == ["starting", "warmup", "warmup", "measure", "measure", "drain", "drain"]
    stopped_early = RunPhases()
    stopped_early.start_load(base - 1, 10.0, base)
    stopped_early.enter("drain")  # the stop came first: measure never begins
    assert stopped_early.now == "drain" and stopped_early.at(base + 11) == "drain"
    assert not stopped_early.measure_began()


def test_a_live_warm_up_moves_measures_start_until_measure_has_begun(monkeypatch):
    base = held_phases_clock(monkeypatch).now
    longer = RunPhases()
    longer.start_load(base - 1, 10.0, base)
    longer.move_measure(base + 30)  # warmupSeconds 10 -> 30 during warm-up
    assert [longer.at(at) for at in (base + 10, base + 29.9, base + 30)] == ["warmup", "warmup", "measure"]
    shorter = RunPhases()
    shorter.start_load(base - 5, 10.0, base - 4)
    shorter.move_measure(base - 3)  # 10 -> 1 after 4 s of warm-up: measure from now, not in the past
    assert shorter.now == "measure" and shorter.at(base - 2) == "warmup" and shorter.measure_began()
    begun = RunPhases()
    begun.start_load(base - 20, 10.0, base - 19)
    begun.move_measure(base + 100)  # measure has begun: it stays
    assert begun.now == "measure" and begun.at(base + 50) == "measure"


def test_the_current_phase_never_goes_back_when_the_clock_does(monkeypatch):
    base = time.time()
    phases = RunPhases()
    phases.start_load(base - 1, 0.0, base)
    phases.enter("drain")
    monkeypatch.setattr(time, "time", lambda: base - 0.5)  # the wall clock stepped back a second
    assert phases.now == "drain"


def test_a_broker_scrape_that_arrives_after_the_stop_is_written_under_measure(tmp_path):
    c = coordinator(tmp_path, FakeWorkers(), warmupSeconds=10)
    metrics = MetricsWriter(tmp_path / "metrics", 100.0)
    c.phases.enter("warmup", at=100.0)  # times long past: each phase began
    c.phases.enter("measure", at=110.0)
    c.phases.enter("drain", at=122.0)
    samples = [("kafka_network_requests_total", {"request": "Produce"}, 7.0)]
    for at in (100.0, 115.0, 121.5):  # the last one answered at 123, after the run stopped
        c.observers.samples.put((at, 1, samples))
    c.observers.take(metrics, c.phases.at, lambda: {})
    assert [(row["end_time"], row["phase"]) for row in metrics.buffers.dicts["brokers"]] == [
        (100.0, "warmup"),
        (115.0, "measure"),
        (121.5, "measure"),
    ]


def test_live_resize_adds_to_the_least_loaded_worker_and_removes_newest_first(tmp_path):
    workers = FakeWorkers()
    c = coordinator(tmp_path, workers, capacity=2, durationSeconds=30)
    c.prepare()
    c._receive(0.01)
    c.phases.enter("measure")
    c.ensemble.send(0, StartLoad(0.0))
    answer = c.modify([("producersPerTopic", "3")])
    assert [a["key"] for a in answer["applied"]] == ["producersPerTopic"]
    [(index, added)] = [(i, m) for i, m in workers.sent if isinstance(m, AddClients)]
    assert [p.producer_id for p in added.producers] == [2] and index == 0
    updates = [m for _, m in workers.sent if isinstance(m, Update)]
    assert len(updates) == 2 and all(u.total_producers == 3 for u in updates)
    c.modify([("producersPerTopic", "1")])
    removed = [c for _, m in workers.sent if isinstance(m, RemoveClients) for c in m.client_ids]
    assert sorted(removed) == ["p1", "p2"]


def test_a_live_warm_up_change_moves_where_the_coordinator_starts_measuring(tmp_path, monkeypatch):
    c = coordinator(tmp_path, FakeWorkers(), warmupSeconds=10, durationSeconds=30)
    c.prepare()
    c._receive(0.01)
    c.load_started = held_phases_clock(monkeypatch).now
    c.phases.start_load(c.load_started - 0.2, 10.0, c.load_started)
    c.ensemble.send(0, StartLoad(c.load_started))
    c.modify([("warmupSeconds", "40")])
    assert c.phase == "warmup" and c.phases.at(c.load_started + 39.9) == "warmup"
    assert c.phases.at(c.load_started + 40) == "measure"


def test_restarts_are_refused_beside_a_consumer_count_change_and_beyond_the_consumers(tmp_path):
    workers = FakeWorkers()
    c = coordinator(tmp_path, workers, durationSeconds=30)
    c.prepare()
    c._receive(0.01)
    c.phases.enter("measure")
    with pytest.raises(DimsterError, match="restartConsumers go in a --set without consumersPerGroup"):
        c.modify([("consumersPerGroup", "0"), ("restartConsumers", "1")])
    with pytest.raises(DimsterError, match="3 consumers at once, of the run's 2"):
        c.modify([("restartConsumers", "2"), ("restartConsumers", "1")])
    assert not [m for _, m in workers.sent if isinstance(m, (RestartConsumers, RemoveClients))]
    assert c.workload.consumers_per_group == 2


@pytest.mark.parametrize(("uncertainty_ms", "warned"), [(0.2, False), (2.0, True)])
def test_clock_uncertainty_against_the_e2e_p50(tmp_path, uncertainty_ms, warned):
    """Offsets land in run.json; an uncertainty over 10 % of the e2e p50 (5 ms here) is warned about."""
    clocks = {0: {"offset_ms": 300.0, "uncertainty_ms": uncertainty_ms, "samples": 12}}
    c = coordinator(tmp_path, FakeWorkers(clocks=clocks))
    assert c.run() == 0
    assert json.loads((c.bundle.path / "run.json").read_text())["clock_offsets"] == {"0": clocks[0]}
    assert any(e["event"] == "clock_uncertainty_high" for e in events(c)) == warned


class HalfRatePlan:
    """A plan of the test's own: halves the rate at its 10th step, ends the load phase at its 30th (the
    loop's steps, not the time: a thread of the niced unit tier may wait seconds for a CPU, and a plan
    on the clock once came to its end without having halved)."""

    name = "halving"

    def __init__(self):
        self.halved = False
        self.steps = 0

    def step(self, elapsed, workload, run):
        self.steps += 1
        if self.steps >= 30:
            return PlanStep(done=True, note="enough")
        if self.steps >= 10 and not self.halved:
            self.halved = True
            assert run.sent > 0
            return PlanStep(sets=[("producerRate", str(workload.producer_rate / 2))])
        return PlanStep()

    def result(self, totals=None, run=None):
        return {"type": self.name, "halved": self.halved}


def test_a_plan_steers_the_run_through_modify_and_ends_its_load(tmp_path):
    workers = FakeWorkers()
    c = coordinator(tmp_path, workers, durationSeconds=0)  # no end of its own: the plan ends it
    c.plan = HalfRatePlan()
    assert c.run() == 0
    [change] = [json.loads(line) for line in (c.bundle.path / "modifications.jsonl").read_text().splitlines()]
    assert (change["key"], change["new"], change["by"]) == ("producerRate", 500.0, "halving")
    updates = [m for _, m in workers.sent if isinstance(m, Update)]
    assert len(updates) == 2 and all(u.workload["producerRate"] == 500.0 for u in updates)
    assert [e["note"] for e in events(c) if e["event"] == "plan"] == ["enough"]
    assert [e["reason"] for e in events(c) if e["event"] == "stopping"] == ["halving plan"]
    assert json.loads((c.bundle.path / "run.json").read_text())["mode"] == {"type": "halving", "halved": True}


def test_consumers_paused_from_the_start_join_first_then_pause_and_the_stop_skips_the_drain(tmp_path):
    workers = FakeWorkers()
    c = coordinator(tmp_path, workers, consumersPaused=True)
    assert c.run() == 0
    sent = [m for _, m in workers.sent]
    assignments_paused = [u.workload["consumersPaused"] for u in sent if isinstance(u, Update)]
    assert assignments_paused == [True, True]  # one Update per worker
    # each worker is told to pause before load starts, so that its consumers leave before any record
    # is sent (the Update after StartLoad let a consumer's poll take 10 records of a busy host's load)
    kinds = {
        w: [type(m).__name__ for i, m in workers.sent if i == w and isinstance(m, (StartLoad, Update))] for w in (0, 1)
    }
    assert kinds == {0: ["Update", "StartLoad"], 1: ["Update", "StartLoad"]}
    kinds = [e["event"] for e in events(c)]
    assert "drain_skipped" in kinds and "drain_started" not in kinds


def test_a_report_probe_measures_each_worker_over_its_own_reports_and_the_slowest_group():
    from dimster.coordinator.account.aggregate import RunAggregate
    from dimster.worker.protocol import ClientInterval

    aggregate = RunAggregate({"g": "t", "fast": "t"})
    aggregate.probing = True
    aggregate.load_started = 100.0

    def report(worker, end, producer_id, acked, settled):
        producer = ClientInterval(f"p{producer_id}", "producer", "t", sent=acked, acked=acked, next_sequence=acked)
        slow = ClientInterval(
            f"c{worker}", "share_consumer", "t", "g", received=settled, settled={producer_id: [(0, settled - 1)]}
        )
        fast = ClientInterval(
            f"f{worker}", "share_consumer", "t", "fast", received=acked, settled={producer_id: [(0, acked - 1)]}
        )
        aggregate.add(worker_report(worker, end, [producer, slow, fast]))

    report(0, 101.0, producer_id=0, acked=100, settled=90)  # worker 0: one second
    report(1, 102.0, producer_id=1, acked=300, settled=300)  # worker 1: two seconds in one report
    probe = aggregate.take_probe()
    assert probe.published == pytest.approx(100 + 150)
    # group g settled 90 + 150 msg/s of 250 acknowledged: 10 msg/s behind, whatever group "fast" did
    assert probe.consumed == pytest.approx(240) and probe.behind == pytest.approx(10)
    assert aggregate.take_probe().published == 0  # taken: the next probe starts empty
