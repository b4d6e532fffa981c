"""The coordinator's loop through the Workers seam, driven by in-memory workers and cluster: phases,
drain, live resize, and what a lost worker does under each onWorkerLoss."""

import gc
import json
import socket
import threading
import time

import pyarrow.parquet as pq
import pytest

from dimster.coordinator.account.self_cost import COLLECT_EVERY
from dimster.coordinator.loop.failures import RunFailed
from dimster.coordinator.loop.phases import RunPhases
from dimster.errors import DimsterError
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import (
    AddClients,
    Closed,
    RemoveClients,
    Reported,
    RestartConsumers,
    StartLoad,
    StopProducers,
    Update,
    worker_report,
)
from dimster.workload.modes.base import PlanStep
from tests.conftest import busy_port
from tests.fake_run import FakeWorkers, coordinator, events
from tests.runs import scrape, scrape_samples

pytestmark = pytest.mark.unit


def test_phases_in_order_and_every_record_accounted(tmp_path, monkeypatch):
    monkeypatch.setattr("dimster.coordinator.account.intake.FLUSH_EVERY", 0.2)  # several parts a table
    workers = FakeWorkers()
    c = coordinator(tmp_path, workers)
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
    assert status_lines and cost["console_lag_ms"]["count"] == len(status_lines)  # one lag per line printed
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


def test_a_report_that_ends_after_warm_up_is_written_as_measured_before_the_loop_switches():
    base = time.time()
    phases = RunPhases()
    phases.start_load(base - 0.2, 10.0, base)  # measure from base + 10, known at load start
    assert phases.now == "warmup"
    ends = (base + 5, base + 9.99, base + 10, base + 11)
    assert [phases.of_report(end, now=base + 9.5) for end in ends] == ["warmup", "warmup", "measure", "measure"]
    phases.enter("drain", at=base + 30)
    assert phases.of_report(base + 5, now=base + 31) == "drain"  # a late clock's report stays where the run is


def test_a_reading_goes_under_the_phase_it_was_taken_in_and_a_stop_in_warm_up_never_measures():
    base = time.time()
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


def test_a_live_warm_up_moves_measures_start_until_measure_has_begun():
    base = time.time()
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


def test_a_lost_worker_fails_the_run_and_keeps_what_was_measured(tmp_path):
    c = coordinator(tmp_path, FakeWorkers(lose_worker=1), on_worker_loss="fail")
    with pytest.raises(RunFailed) as failed:
        c.run()
    assert failed.value.exit_code == 4
    info = json.loads((c.bundle.path / "run.json").read_text())
    assert info["status"] == "failed" and "worker 1 (fake) went silent" in info["failure"]
    assert info["totals"]["sent"] > 0
    [lost] = [e for e in events(c) if e["event"] == "worker_lost"]
    assert lost["worker"] == 1 and lost["clients"] == ["c0", "c1"]  # worker 0 has the producers


class BehindWorkers(FakeWorkers):
    """From the third step of load on, worker 1's reports fall behind for good: its consumers go on
    settling what the producers send, unheard, and its Closed never comes."""

    def receive(self, timeout: float, doorbell: int | None = None):
        received = super().receive(timeout, doorbell)
        unheard = (Reported, Closed)
        return [(i, m) for i, m in received if self.steps < 3 or not (i == 1 and isinstance(m, unheard))]


def test_a_worker_not_heard_to_its_end_leaves_its_records_in_doubt_not_lost_and_fails_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr("dimster.coordinator.loop.run.CLOSE_TIMEOUT", 0.5)
    workers = BehindWorkers()
    c = coordinator(tmp_path, workers, drainTimeoutSeconds=1)
    with pytest.raises(RunFailed):
        c.run()
    info = json.loads((c.bundle.path / "run.json").read_text())
    assert info["failure"] == "worker(s) 1 did not close in time"
    totals = info["totals"]
    assert totals["lost"] == 0 and totals["unconsumed"] == 0
    assert totals["in_doubt"] > 0 and totals["received"] + totals["in_doubt"] == totals["acked"]
    [lost] = [e for e in events(c) if e["event"] == "worker_lost"]
    assert lost["worker"] == 1 and lost["clients"] == ["c0", "c1"]


def test_with_continue_the_lost_clients_go_on_elsewhere_under_fresh_ids(tmp_path):
    workers = FakeWorkers(lose_worker=1)
    c = coordinator(tmp_path, workers, on_worker_loss="continue")
    assert c.run() == 0
    [replaced] = [e for e in events(c) if e["event"] == "clients_replaced"]
    assert replaced["lost"] == ["c0", "c1"] and replaced["new"] == {"c2": 0, "c3": 0}
    [(index, added)] = [(i, m) for i, m in workers.sent if isinstance(m, AddClients)]
    assert index == 0 and added.producers == []
    assert [c.consumer_id for c in added.consumers] == [2, 3]
    assert not any(i == 1 for i, m in workers.sent if isinstance(m, StopProducers))
    totals = json.loads((c.bundle.path / "run.json").read_text())["totals"]
    assert totals["lost"] == 0 and totals["received"] == totals["acked"]


def test_clients_whose_kafka_clients_version_no_live_worker_runs_fail_the_run_in_one_line(tmp_path):
    """Producers on 4.3.1 go on worker 0, share consumers on the cluster's 4.4.0 on worker 1: when
    worker 0 is lost, its producers have nowhere to go on, whatever onWorkerLoss says."""
    workers = FakeWorkers(lose_worker=0)
    c = coordinator(
        tmp_path, workers, on_worker_loss="continue", clientLibrary="java", clientVersion={"producer": "4.3.1"}
    )
    assert c.ensemble.worker_versions == ["4.3.1", "4.4.0"]
    with pytest.raises(RunFailed):
        c.run()
    [lost] = [e for e in events(c) if e["event"] == "worker_lost"]
    assert lost["clients"] == ["p0", "p1"]  # worker 0 hosted the producers, worker 1 the consumers
    info = json.loads((c.bundle.path / "run.json").read_text())
    assert info["status"] == "failed" and info["failure"] == "no live worker runs kafka-clients 4.3.1 for p2, p3"
    assert not [m for _, m in workers.sent if isinstance(m, AddClients)]
    assert [p.producer_id for p in c.topology.producers] == [] and len(c.topology.consumers) == 2


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


def test_a_live_warm_up_change_moves_where_the_coordinator_starts_measuring(tmp_path):
    c = coordinator(tmp_path, FakeWorkers(), warmupSeconds=10, durationSeconds=30)
    c.prepare()
    c._receive(0.01)
    c.load_started = time.time()
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
    """A plan of the test's own: halves the rate at 0.5 s, ends the load phase at 1.2 s."""

    name = "halving"

    def __init__(self):
        self.halved = False

    def step(self, elapsed, workload, run):
        if elapsed >= 1.2:
            return PlanStep(done=True, note="enough")
        if elapsed >= 0.5 and not self.halved:
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


def test_the_metrics_endpoint_serves_each_status_number_in_its_metrics_unit_and_nothing_for_none():
    from dimster.coordinator.control.exporter import StatusExporter

    exporter = StatusExporter({"run": "r1"})
    try:
        exporter.update({"e2eP99Ms": 12.5, "e2eP50Ms": 2.0, "sent": 7, "publishP99Ms": None})
        samples = scrape(exporter.url)
    finally:
        exporter.close()
    assert samples["dimster_e2e_latency_p99_seconds"][1] == pytest.approx(0.0125)  # ms -> s
    assert samples["dimster_e2e_latency_p50_seconds"][1] == pytest.approx(0.002)
    assert samples["dimster_sent_messages_total"][1] == 7
    assert not any(name.startswith("dimster_publish_latency") for name in samples)  # not known: no series


def test_the_metrics_endpoint_serves_the_status_schema_with_the_run_labels(tmp_path):
    from dimster.coordinator.control.exporter import StatusExporter
    from dimster.coordinator.control.status_schema import FIELDS

    exporter = StatusExporter({"environment": "test", "run": "r1", "workload": "w", "mode": "steady"})
    try:
        c = coordinator(tmp_path, FakeWorkers(), exporter=exporter)
        assert c.run() == 0
        samples = scrape(exporter.url)
        totals = json.loads((c.bundle.path / "run.json").read_text())["totals"]
        assert samples["dimster_sent_messages_total"][1] == totals["sent"] > 0
        assert samples["dimster_received_messages_total"][1] == totals["received"]
        per_client = [s for s in scrape_samples(exporter.url) if s.name == "dimster_client_received_messages_total"]
        assert sum(s.value for s in per_client) == totals["received"]  # the series per kind of client add up
        assert samples["dimster_lost_messages"][1] == totals["lost"] == 0  # known at the end, exported then
        status = c.status()
        # every number of the final status, in the metric's unit, and no series for a field the status has
        # no value for (the last console window's latencies, after a drain a slow host stretched past a line)
        for field in FIELDS:
            value = status.get(field.name)
            if field.name == "elapsedSeconds":  # its clock moved on since the endpoint's last update
                continue
            if value is None:
                assert field.metric not in samples, field.name
            else:  # a plain number: anything else the endpoint would leave out silently
                assert isinstance(value, int | float) and not isinstance(value, bool), (field.name, value)
                assert samples[field.metric][1] == pytest.approx(value * field.scale), field.name
        assert samples["dimster_backlog_messages"][1] == status["backlog"]
        labels = samples["dimster_sent_messages_total"][0]
        assert labels == {"environment": "test", "run": "r1", "workload": "w", "mode": "steady"}
        assert status["metricsUrl"] == exporter.url
        figures = status["figures"]  # the same numbers under the thresholds' names
        assert (figures["e2e.p99"], figures["sent"], figures["lost"]) == (status["e2eP99Ms"], totals["sent"], 0)
        assert (figures["consumed.rate"], figures["lock_timeouts"]) == (status["consRate"], status["lockTimeouts"])
        assert "in_doubt" not in figures and "backlog.max" not in figures  # no value now; the run's maximum
        assert figures["backlog.end"] == status["backlog"]
    finally:
        exporter.close()
    exporter.thread.join(10)  # closed: its serving thread ends and its port answers no more
    assert not exporter.thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(exporter.server.server_address[:2], timeout=5).close()
    # Prometheus naming: counters end in _total, every other name carries its unit or is a count
    assert len({f.metric for f in FIELDS}) == len(FIELDS)
    assert all(f.metric.endswith("_total") == (f.kind == "counter") for f in FIELDS)


def test_the_endpoint_has_counters_and_latency_histograms_per_kind_of_client():
    import numpy as np

    from dimster.coordinator.control.client_series import LADDER_SECONDS
    from dimster.coordinator.control.exporter import StatusExporter
    from dimster.metrics.histogram import Histogram
    from dimster.worker.protocol import ClientInterval

    e2e_us = np.array([150, 900, 1_000, 1_100, 40_000, 3_000_000], dtype=float)  # 0.15 ms .. 3 s
    histogram = Histogram()
    histogram.record_array(e2e_us)
    stats = {"tx_requests": 10.0, "batch_records_avg": 4.0, "request_latency_avg_ms": 25.0}

    def report(worker, received):
        return worker_report(
            worker,
            100.0,
            [
                ClientInterval("p0", "producer", "t", library="java", sent=7, acked=6, client_stats=stats),
                ClientInterval("c9", "share_consumer", "t", "g", library="librdkafka", max_poll_records=500),
                ClientInterval(
                    "c0",
                    "share_consumer",
                    "t",
                    "g",
                    library="librdkafka",
                    received=received,
                    polls=2,
                    max_poll_records=3,
                ),
            ],
            histograms=HistogramColumns.gather(
                [{}, {}, {("e2e", 0): histogram.to_wire(), ("warmup_e2e", 1): histogram.to_wire()}]
            ),
        )

    exporter = StatusExporter({"run": "r1"})
    try:
        exporter.add(report(0, received=5))
        exporter.add(report(0, received=4))
        exporter.add(report(1, received=1))
        samples = scrape_samples(exporter.url)
    finally:
        exporter.close()

    def values(name, **labels):
        return [s.value for s in samples if s.name == name and labels.items() <= s.labels.items()]

    assert values("dimster_client_received_messages_total", worker="0", role="share_consumer", group="g") == [9]
    assert values("dimster_client_received_messages_total", worker="1") == [1]
    assert all(s.labels["run"] == "r1" for s in samples if s.name.startswith("dimster_client_"))  # the run's too
    assert values("dimster_client_sent_messages_total", worker="0", role="producer", client_library="java") == [14]
    assert values("dimster_client_polls_total", worker="0") == [4]
    assert values("dimster_client_max_records_per_poll", worker="0") == [500]  # the most of c0 and c9
    assert values("dimster_client_requests_total", worker="0", role="producer") == [10.0]  # latest, not summed
    assert values("dimster_producer_batch_records_avg", worker="0") == [4.0]
    assert values("dimster_client_request_latency_seconds_avg", worker="0") == [0.025]  # ms to s
    # e2e: measured and warm-up, both partitions, two reports on worker 0 = 4 x each value, in seconds
    buckets = {
        s.labels["le"]: s.value
        for s in samples
        if s.name == "dimster_e2e_latency_seconds_bucket" and s.labels["worker"] == "0"
    }
    assert len(buckets) == len(LADDER_SECONDS) + 1 and buckets["+Inf"] == 4 * len(e2e_us)
    for le, count in buckets.items():
        bound = float(le)  # a dimster bucket edge within 1 % of the ladder's value
        assert count == 4 * int((e2e_us <= bound * 1e6).sum()), le
    assert values("dimster_e2e_latency_seconds_count", worker="0") == [4 * len(e2e_us)]
    assert values("dimster_e2e_latency_seconds_sum", worker="0")[0] == pytest.approx(4 * e2e_us.sum() / 1e6, rel=0.01)


def test_a_metrics_port_in_use_is_one_line():

    from dimster.coordinator.control.exporter import StatusExporter
    from dimster.errors import DimsterError

    with busy_port() as port, pytest.raises(DimsterError, match=rf"cannot listen on 127.0.0.1:{port}"):
        StatusExporter({}, port=port)


@pytest.mark.unit
def test_the_console_line_reads_the_status_schema():
    from dimster.coordinator.control.console import POLLS, SEGMENTS, field_names, status_line
    from dimster.coordinator.control.status_schema import NAMES

    assert {name for segment in (*SEGMENTS, POLLS) for name in field_names(segment)} <= set(NAMES)
    window = {
        "pubRate": 1000.0,
        "consRate": 998.4,
        "targetRate": 1000.0,
        "pubRate10s": 1000.0,
        "sent": 12_345,
        "received": 12_300,
        "backlog": 45,
        "e2eP50Ms": 5.06,
        "e2eP99Ms": None,
        "publishP99Ms": 20.0,
        "recordsPerPoll": 6.25,
        "maxPollRecords": 40,
        "sendErrors": 0,
        "duplicates": 2,
    }
    assert status_line(12.0, "measure", window) == (
        "[    12s measure] pub     1,000 msg/s | cons       998 msg/s | sent      12,345 | recv      12,300 | "
        "backlog        45 | e2e p50 5.1 ms p99 - | pub p99 20.0 ms | poll avg 6.2 max 40  !! 2 duplicates"
    )
    assert status_line(12.0, "measure", window, planned=60.0).startswith("[    12s/60s measure] pub     1,000 msg/s")


@pytest.mark.unit
def test_the_console_gives_the_planned_seconds_of_a_run_whose_length_is_known():
    from dimster.workload.model import parse_workload
    from dimster.workload.modes import plan_for
    from dimster.workload.modes.base import planned_seconds

    def planned(**keys) -> float | None:
        workload = parse_workload({"name": "w", "warmupSeconds": 10, "durationSeconds": 50, **keys}, "w.yaml")
        return planned_seconds(plan_for(workload), workload)

    assert planned() == 60 and planned(mode="correctness") == 60 and planned(mode="max-rate") == 60
    assert planned(durationSeconds=0) is None  # runs until stopped
    assert planned(mode={"type": "explore-limits", "targetE2eP99Ms": 100}) is None  # ends when it has found
    assert planned(mode={"type": "drain-backlog", "backlogRecords": 1000}) is None


@pytest.mark.unit
def test_the_console_warns_when_a_workers_threads_waited_to_run():
    """Worker 1's probe waited 0.3 of its 2 s, worker 0's 0.02 of 2 s: the window's share is the larger,
    and worker 1, saturated, is warned of while load runs (diagnosis/generator.py)."""
    from dimster.coordinator.account.aggregate import RunAggregate
    from dimster.coordinator.control.console import warnings
    from dimster.worker.protocol import WakeLag

    aggregate = RunAggregate({})
    aggregate.load_started = 100.0
    for end in (101.0, 102.0):
        aggregate.add(worker_report(0, end, [], wake_lag=WakeLag(wakes=98, lag_ms_sum=10.0, lag_ms_max=1.0)))
        aggregate.add(worker_report(1, end, [], wake_lag=WakeLag(wakes=70, lag_ms_sum=150.0, lag_ms_max=40.0)))
    window = aggregate.take_window()
    assert window["workerWaitShare"] == pytest.approx(0.15)
    status = {**window, "targetRate": 0}
    assert [w["worker"] for w in window["generator"]] == [1]
    assert warnings("measure", status) == [
        "the load generator is saturated (worker 1: its threads waited 15% of the time to run): latencies "
        "and rates include dimster's own wait, not only Kafka's (more workers (--workers N, or workers: N in "
        "the environment), fewer clients a worker, clientLibrary librdkafka where it serves)"
    ]
    assert warnings("measure", {**status, "generator": []}) == []
    assert warnings("drain", status) == []
    assert aggregate.take_window()["workerWaitShare"] is None  # a window without reports


@pytest.mark.unit
def test_client_statistics_leave_out_quiet_clients_and_survive_rebuilds():
    from dimster.clients import STATS_INTERVAL_S
    from dimster.coordinator.control.client_series import ClientSeries
    from dimster.worker.protocol import ClientInterval

    def producer(client_id, batch_records, requests):
        stats = {"batch_records_avg": batch_records, "tx_requests": requests}
        return ClientInterval(client_id, "producer", "t", library="java", client_stats=stats)

    series = ClientSeries({"run": "r"})
    series.add(worker_report(0, 100.0, [producer("p0", 2.0, 5.0), producer("p1", 4.0, 5.0)]))
    series.add(worker_report(0, 101.0, [producer("p1", 4.0, 7.0)]))
    series.add(worker_report(0, 100.0 + 3 * STATS_INTERVAL_S, [producer("p1", 8.0, 1.0)]))  # p0 removed, p1 rebuilt
    families = {f.name: f for f in series.collect()}
    [batch] = families["dimster_producer_batch_records_avg"].samples
    assert batch.value == 8.0 and batch.labels["run"] == "r"
    # a counter never goes back: p0's 5 requests stay, and p1's 7 before its rebuild count beside its new 1
    [requests] = families["dimster_client_requests"].samples
    assert requests.value == 5 + 7 + 1


@pytest.mark.unit
def test_the_broker_scraper_lines_brokers_up_and_notes_one_that_does_not_answer_once(monkeypatch):
    from prometheus_client import CollectorRegistry, Gauge, start_http_server

    from dimster.coordinator.observers import broker_scrape
    from dimster.coordinator.observers.broker_scrape import BrokerScraper

    monkeypatch.setattr(broker_scrape, "TIMEOUT", 1.0)  # broker 3 never answers: each round waits this long

    servers, urls = [], {}
    for broker in (1, 2):
        registry = CollectorRegistry()
        Gauge("kafka_server_underreplicatedpartitions", "", registry=registry).set(broker)
        Gauge("some_other_series", "", registry=registry).set(1)  # not kept
        server, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
        servers.append(server)
        urls[broker] = f"http://127.0.0.1:{server.server_port}/metrics"
    with busy_port() as port:  # listens, but never answers HTTP
        urls[3] = f"http://127.0.0.1:{port}/metrics"
        delivered, notes = [], []
        scraper = BrokerScraper(urls, lambda at, broker, samples: delivered.append((at, broker, samples)), notes.append)
        scraper.scrape_once()
        scraper.scrape_once()
    for server in servers:
        server.shutdown()
        server.server_close()
    assert [broker for _, broker, _ in delivered] == [1, 2, 1, 2]
    assert delivered[0][0] == delivered[1][0] != delivered[2][0]  # one time per round
    assert delivered[1][2] == [("kafka_server_underreplicatedpartitions", {}, 2.0)]
    assert len(notes) == 1 and "broker 3" in notes[0]  # said once, not at every round


@pytest.mark.unit
def test_the_broker_scraper_tells_an_answer_that_is_not_an_exporters_and_raises_its_own_bug(monkeypatch):
    """An endpoint answering what is not Prometheus's text is said so (not "does not answer"); a bug
    in reading the samples (a TypeError planted in parse_samples) is raised, not noted as the broker's."""
    import http.server

    from dimster.coordinator.observers import broker_scrape

    class Garbage(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"kafka_x{broker=1 2\n")  # a label set never closed

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        notes: list[str] = []
        urls = {1: f"http://127.0.0.1:{server.server_port}/metrics"}
        scraper = broker_scrape.BrokerScraper(urls, lambda *_: None, notes.append)
        scraper.scrape_once()
        assert len(notes) == 1 and "answer what is not Prometheus's text format" in notes[0], notes

        def broken(text):
            raise TypeError("planted")

        monkeypatch.setattr(broker_scrape, "parse_samples", broken)
        with pytest.raises(TypeError, match="planted"):
            broker_scrape.BrokerScraper(urls, lambda *_: None, notes.append).scrape_once()
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.unit
def test_the_broker_scraper_warms_each_exporter_up_once_keeps_nothing_of_it_and_never_asks_twice_at_once():
    import http.server

    from dimster.coordinator.observers.broker_scrape import BrokerScraper

    asked: dict[int, int] = {}  # port -> requests answered
    busy: dict[int, int] = {}  # port -> requests in progress
    most_at_once = []

    class Exporter(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            port = self.server.server_port
            busy[port] = busy.get(port, 0) + 1
            most_at_once.append(busy[port])
            time.sleep(0.3 if port not in asked else 0)  # a fresh exporter's first answer is slow
            asked[port] = asked.get(port, 0) + 1
            busy[port] -= 1
            body = b"kafka_server_underreplicatedpartitions 0\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Exporter) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    urls = {i + 1: f"http://127.0.0.1:{s.server_port}/metrics" for i, s in enumerate(servers)}
    delivered, notes = [], []
    scraper = BrokerScraper(urls, lambda at, broker, samples: delivered.append(broker), notes.append)
    try:
        scraper.warm_up()
        scraper.start()  # load starts while the warm-up is still waiting for its first answer
        deadline = time.monotonic() + 10
        while len(delivered) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        scraper.stopped.set()
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
    assert asked == {s.server_port: 2 for s in servers}  # the warm-up's answer, then the baseline
    assert max(most_at_once) == 1
    assert delivered == [1, 2] and notes == []  # only the baseline was kept


class BrokenWorkers(FakeWorkers):
    """In-memory workers whose channel breaks with an error that is not dimster's, mid-load."""

    def receive(self, timeout: float, doorbell: int | None = None):
        received = super().receive(timeout)
        if self.steps == 6:
            raise RuntimeError("the channel broke")
        return received


def test_an_internal_error_mid_run_keeps_what_was_measured_and_says_failed(tmp_path):
    workers = BrokenWorkers()
    c = coordinator(tmp_path, workers, durationSeconds=30)
    with pytest.raises(RuntimeError):
        c.run()
    info = json.loads((c.bundle.path / "run.json").read_text())
    reason = "internal error: RuntimeError: the channel broke (traceback in logs/coordinator-errors.log)"
    assert info["status"] == "failed" and info["failure"] == reason
    trace = (c.bundle.path / "logs" / "coordinator-errors.log").read_text()
    assert "the run\nTraceback (most recent call last)" in trace and "in receive\n" in trace  # where it broke
    assert info["totals"]["sent"] > 0 and info["totals"]["acked"] == c.aggregate.acked
    assert info["totals"]["unconsumed"] is None  # the groups' positions were never read
    parts = list((c.bundle.path / "metrics" / "intervals").glob("*.parquet"))
    assert parts and not list((c.bundle.path / "metrics").rglob(".*.writing"))  # flushed, whole
    assert not any(isinstance(m, StopProducers) for _, m in workers.sent)  # it never reached its stop
    events = [json.loads(line) for line in (c.bundle.path / "events.jsonl").read_text().splitlines()]
    assert [e["reason"] for e in events if e["event"] == "run_failed"] == [reason]
    assert (c.bundle.path / "console.log").read_text().splitlines()[-1] == f"error: {reason}"
    from dimster.results.history import run_row

    assert run_row(c.bundle.path)["failure"] == reason  # `dimster history` says why


def test_a_part_cut_short_is_left_out_with_a_note_and_parts_appear_whole(tmp_path):
    from dimster.results.metrics_parts import readable_parts
    from dimster.results.metrics_writer import MetricsWriter
    from dimster.worker.protocol import ClientInterval

    writer = MetricsWriter(tmp_path / "metrics", 100.0)
    for second in range(3):
        writer.add(worker_report(0, 101.0 + second, [ClientInterval("p0", "producer", "t", sent=10)]), "measure")
        writer.flush()
    table = tmp_path / "metrics" / "intervals"
    assert sorted(p.name for p in table.iterdir()) == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    whole = (table / "part-00002.parquet").read_bytes()
    (table / "part-00002.parquet").write_bytes(whole[:-20])  # its footer gone, as after a crash mid-write
    parts, notes = readable_parts(table)
    assert [p.name for p in parts] == ["part-00000.parquet", "part-00001.parquet"]
    [note] = notes
    assert note.startswith("intervals/part-00002.parquet is unreadable and left out")


@pytest.mark.parametrize("broken", ["cluster", "bug"])
def test_group_configs_the_cluster_cannot_tell_are_a_note_but_a_bug_reading_them_fails_the_run(tmp_path, broken):
    """The groups' effective configs at start: a cluster that does not answer is a console note and the
    default lock time; a bug in reading them (a KeyError) fails the run with its traceback, never
    passing for Kafka's default."""
    from confluent_kafka import KafkaError, KafkaException

    c = coordinator(tmp_path, FakeWorkers())

    def group_config(group, prefix):
        if broken == "cluster":
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        raise KeyError("share.record.lock.duration.ms")

    c.kafka.group_config = group_config  # type: ignore[method-assign]
    if broken == "cluster":
        assert c.run() == 0
        console = (c.bundle.path / "console.log").read_text()
        assert "-- the groups' config could not be read at start" in console
    else:
        with pytest.raises(KeyError):
            c.run()
        info = json.loads((c.bundle.path / "run.json").read_text())
        assert info["status"] == "failed" and info["failure"].startswith("internal error: KeyError")


def test_a_helper_threads_bug_leaves_its_traceback_in_the_bundle_and_one_line_on_stderr(tmp_path, capfd):
    """A thread of the run that dies of an exception it did not expect (here a planted KeyError) is
    no silent loss of a figure: its traceback, secrets masked, is in logs/coordinator-errors.log, and
    stderr has one line saying so, no traceback."""
    from dimster.coordinator.loop.failures import thread_errors_logged

    c = coordinator(tmp_path, FakeWorkers())
    before = threading.excepthook  # pytest's own (it reports a thread's exception too)

    def scrape() -> None:
        raise KeyError("kafka_server_x sasl.jaas.config=planted-secret-value")

    with thread_errors_logged(c.bundle):
        thread = threading.Thread(target=scrape, name="broker-scrape")
        thread.start()
        thread.join()
    trace = (c.bundle.path / "logs" / "coordinator-errors.log").read_text()
    assert "thread broker-scrape\nTraceback (most recent call last)" in trace and "in scrape\n" in trace
    assert "KeyError" in trace and "planted-secret-value" not in trace
    said = capfd.readouterr().err
    assert said.startswith("dimster: thread broker-scrape ended: internal error: KeyError") and said.count("\n") == 1
    assert "Traceback" not in said and "planted-secret-value" not in said
    assert threading.excepthook is before  # as it was, once the run ends
