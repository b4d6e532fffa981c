"""What the coordinator's run loop does when something fails, driven by in-memory workers and cluster:
a lost worker under each onWorkerLoss, a worker not heard to its end, an error mid-run, a part cut
short, a bug in a helper thread. Each keeps what was measured."""

import json
import threading

import pytest

from dimster.coordinator.loop.failures import RunFailed
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.protocol import (
    AddClients,
    Closed,
    Reported,
    StopProducers,
    worker_report,
)
from tests.fake_run import STEP_SECONDS, FakeWorkers, coordinator, events

pytestmark = pytest.mark.unit


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

    def __init__(self):
        super().__init__(steps_needed=3)  # its third step, worker 1's first unheard, comes while load runs

    def receive(self, timeout: float, doorbell: int | None = None):
        received = super().receive(timeout, doorbell)
        unheard = (Reported, Closed)
        return [(i, m) for i, m in received if self.steps < 3 or not (i == 1 and isinstance(m, unheard))]


def test_a_worker_not_heard_to_its_end_leaves_its_records_in_doubt_not_lost_and_fails_the_run(tmp_path, monkeypatch):
    """The drain and the close time out on the fake's clock: each wait of the run loop ends after as many
    of the fake's receives as its seconds hold (on the host's clock, a loop a busy host held could find
    the close's deadline passed before its first receive took worker 0's Closed)."""
    workers = BehindWorkers()

    class StepsDeadline:
        def __init__(self, seconds: float):
            self.at = workers.passes + seconds / STEP_SECONDS

        def passed(self) -> bool:
            return workers.passes >= self.at

    monkeypatch.setattr("dimster.coordinator.loop.run.Deadline", StepsDeadline)
    monkeypatch.setattr("dimster.coordinator.loop.run.CLOSE_TIMEOUT", 0.5)
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


class BrokenWorkers(FakeWorkers):
    """In-memory workers whose channel breaks with an error that is not dimster's, mid-load."""

    def __init__(self):
        super().__init__(steps_needed=6)  # the load's duration cannot end it first

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
