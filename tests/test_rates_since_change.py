"""A live change shows in the status within a second (issue 51): a worker sends Progress samples as the
change reaches it and five times a second for three seconds; the status's rates come from them until
the reports' window holds only reports from after the change, and the console tells the change's
rates once, half a second in. The reports (the run's record) are not changed by any of it."""

import itertools
import multiprocessing
import threading

import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.intake import ReportIntake
from dimster.coordinator.account.journal import RunJournal
from dimster.coordinator.account.since_change import RatesSinceChange
from dimster.coordinator.account.window import RecentRates
from dimster.coordinator.control.api import Doorbell
from dimster.worker.client_columns import ClientInterval
from dimster.worker.process import PipeChannel, Worker
from dimster.worker.protocol import (
    PROGRESS_EVERY,
    PROGRESS_SECONDS,
    Assignment,
    Close,
    Closed,
    Progress,
    Ready,
    Reported,
    StartLoad,
    Update,
    worker_report,
)
from tests.waiting import until

pytestmark = pytest.mark.unit

T = 1_790_000_000.0  # the change's time, epoch seconds


def sample(at: float, sent: int, received: int = 0, target: float = 2000.0, change: int = 1) -> Progress:
    return Progress(T + at, sent, received, target, change)


def test_the_rates_since_a_change_sum_each_workers_counts_over_its_own_samples():
    since = RatesSinceChange()
    since.restart(1, {0, 1})
    since.note(0, sample(-1.2, 100, change=0))  # a first sample of a worker's start
    since.note(0, sample(0.01, 5_000, 4_000))
    since.note(1, sample(0.02, 7_000, 6_900))
    since.note(0, sample(0.21, 5_400, 4_390))
    assert since.rates(T + 0.3) is None  # worker 1 has no sample after its first yet: not half a picture
    since.note(1, sample(0.42, 7_800, 7_700, target=1000.0))
    rates = since.rates(T + 0.5)
    assert rates == pytest.approx(
        {"pubRate": 400 / 0.2 + 800 / 0.4, "consRate": 390 / 0.2 + 800 / 0.4, "targetRate": 3000.0, "rateSeconds": 0.2}
    )
    assert since.rates(T + 0.02 + PROGRESS_SECONDS + 0.01) is None  # over: the reports' window takes over
    since.lose(1)  # a worker gone: the change's rates go on without it
    assert since.rates(T + 0.5)["pubRate"] == pytest.approx(2000)  # type: ignore[index]


def test_a_sample_of_another_change_is_not_counted_nor_one_of_a_worker_not_sent_it():
    """The change's number tells its samples, whatever the workers' clocks say (an agent's clock may be
    behind the coordinator's by more than its error)."""
    since = RatesSinceChange()
    since.restart(2, {0})
    since.note(0, sample(0.1, 10, change=1))  # the previous change's, still on its way
    since.note(0, sample(0.3, 500, change=1))
    assert since.rates(T + 0.4) is None
    since.note(3, sample(0.01, 10, change=2))  # worker 3 was not sent this change
    since.note(0, sample(-0.2, 100, change=2))  # its clock 0.2 s behind: still the change's
    since.note(0, sample(0.3, 1_100, change=2))
    assert since.rates(T + 0.6) == pytest.approx({"pubRate": 2000, "consRate": 0, "targetRate": 2000.0,
                                                  "rateSeconds": 0.5})  # fmt: skip


def test_a_worker_that_takes_the_change_late_delays_its_rates_and_their_end_alike():
    """A worker busy stopping removed clients takes the change 2.5 s late: the change's rates wait for
    it, and last PROGRESS_SECONDS from then."""
    since = RatesSinceChange()
    since.restart(1, {0, 1})
    since.note(0, sample(0.0, 0))
    since.note(0, sample(2.8, 5_600))
    assert since.rates(T + 2.8) is None and since.to_tell(T + 2.8) is None
    since.note(1, sample(2.5, 100))
    since.note(1, sample(3.1, 1_300))
    assert since.to_tell(T + 3.1) == pytest.approx(
        {"pubRate": 2000 + 2000, "consRate": 0, "targetRate": 4000.0, "rateSeconds": 0.6}
    )
    assert since.rates(T + 2.5 + PROGRESS_SECONDS - 0.01) is not None
    assert since.rates(T + 2.5 + PROGRESS_SECONDS + 0.01) is None


def test_the_console_is_told_a_changes_rates_once_half_a_second_in():
    since = RatesSinceChange()
    assert since.to_tell(T) is None  # no change yet
    since.restart(1, {0})
    since.note(0, sample(0.0, 0))
    told = []
    for step in range(1, 15):
        since.note(0, sample(step * 0.2, step * 400))
        told.append(since.to_tell(T + step * 0.2))
    assert [t is not None for t in told] == [False, False, True] + [False] * 11
    assert told[2] == pytest.approx({"pubRate": 2000, "consRate": 0, "targetRate": 2000.0, "rateSeconds": 0.6})


def test_recent_rates_after_a_change_count_only_reports_begun_after_it():
    """A report that spans the change mixes the two rates (here 500 and 2,000 msg/s): not counted."""
    recent = RecentRates((5.0, 10.0))
    for second in range(1, 6):
        recent.add(0, T - 5 + second, 1.0, 500, 500.0, 0, since=T - 6 + second)
    recent.clear(T - 0.4)  # the change, 0.4 s before the report that ends at T
    recent.add(0, T + 0.0, 1.0, 500 * 0.6 + 2000 * 0.4, 2000.0, 0, since=T - 1.0)
    assert recent.rates(5.0)["pubRate"] == 0 and recent.covered(5.0) == 0
    recent.add(0, T + 1.0, 1.0, 2000, 2000.0, 0, since=T)
    assert recent.rates(5.0) == pytest.approx({"pubRate": 2000, "targetRate": 2000, "consRate": 0})
    assert recent.covered(5.0) == 1.0


class Said:
    def __init__(self) -> None:
        self.told: list[tuple[str, str, dict]] = []

    def tell(self, kind: str, line: str, **details) -> None:
        self.told.append((kind, line, details))


def test_the_status_reads_progress_after_a_change_and_the_reports_window_before_and_after(tmp_path):
    """Through the intake as the run loop hands it the workers' messages: Progress changes no count."""
    aggregate = RunAggregate({"g": "t"})
    aggregate.load_started = T - 6
    said = Said()
    intake = ReportIntake(aggregate, None, said, None, RunJournal(tmp_path))  # type: ignore[arg-type]

    def reported(end: float, sent: int) -> Reported:
        producer = ClientInterval("p0", "producer", "t", target_rate=sent, sent=sent, acked=sent, next_sequence=0)
        return Reported(worker_report(0, end, [producer]))

    def take(*messages) -> list:
        return list(intake.taken([(0, m) for m in messages], None, lambda _: "measure", True))

    take(*(reported(T - 5 + s, 500) for s in range(6)))
    assert aggregate.workers.status_rates(T)["pubRate"] == pytest.approx(500)
    intake.follow(aggregate_workload(), (T + 0.1, 1), [0])
    before = {"pubRate": 500, "consRate": 0, "targetRate": 500, "rateSeconds": 6.0}
    assert aggregate.workers.status_rates(T + 0.15) == pytest.approx(before)  # nothing known of after: as it was
    assert take(sample(0.12, 3_000)) == []
    assert aggregate.workers.status_rates(T + 0.2) == pytest.approx(before)  # one sample is no rate yet
    assert take(sample(0.32, 3_400), sample(0.72, 4_200)) == []
    assert aggregate.workers.status_rates(T + 0.8) == pytest.approx(
        {"pubRate": 2000, "consRate": 0, "targetRate": 2000, "rateSeconds": 0.6}
    )
    assert aggregate.sent == 3000  # Progress is not counted: the reports are the record
    assert [kind for kind, _, _ in said.told] == ["rates_since_change"]
    assert "since the change (0.6 s): pub 2,000 msg/s (target 2,000)" in said.told[0][1]
    take(reported(T + 1, 500 * 0.1 + 2000 * 0.9), reported(T + 2, 2000), reported(T + 3, 2000))
    status = aggregate.workers.status_rates(T + PROGRESS_SECONDS + 0.2)  # from the reports again
    assert status == pytest.approx({"pubRate": 2000, "consRate": 0, "targetRate": 2000, "rateSeconds": 2.0})


def aggregate_workload():
    from dimster.workload.model import Workload

    return Workload.model_validate({"name": "w"})


def test_a_worker_sends_progress_as_a_change_reaches_it_and_for_a_few_seconds_after(tmp_path):
    """A worker (no clients: what it sends is the point) takes an Update: a first sample at once, then one
    every PROGRESS_EVERY until PROGRESS_SECONDS have passed, none after; its reports go on. Judged by the
    samples' own stamps and the reports that came after them, not by when they reached the test: a
    thread of the niced unit tier may wait seconds for a CPU."""
    ours, theirs = multiprocessing.Pipe()
    workload = {"name": "w", "producerRate": 100}
    assignment = Assignment(0, "127.0.0.1:1", workload, [], [], 1, 5, str(tmp_path / "worker.log"), "4.4.0")
    worker = Worker(PipeChannel(theirs), assignment)
    serving = threading.Thread(target=worker.serve, daemon=True)
    serving.start()
    coordinator = PipeChannel(ours)
    assert coordinator.poll(60) and coordinator.recv() == Ready()
    coordinator.send(Update(workload, 1, change=7))
    received = []

    def reports_after_the_first_sample() -> int:
        while coordinator.poll(0):
            received.append(coordinator.recv())
        first = next((i for i, m in enumerate(received) if isinstance(m, Progress)), len(received))
        return sum(isinstance(m, Reported) for m in received[first:])

    # a report a second, as before; 5 of them after the first sample: seconds past the samples' end
    assert until(lambda: reports_after_the_first_sample() >= 5)
    coordinator.send(Close())
    while coordinator.poll(60) and coordinator.recv() != Closed():
        pass
    serving.join(120)
    samples = [m for m in received if isinstance(m, Progress)]
    assert {m.change for m in samples} == {7}
    assert 2 <= len(samples) <= 1 + round(PROGRESS_SECONDS / PROGRESS_EVERY)  # never a burst: one a step
    stamps = [m.at for m in samples]
    assert all(b - a >= PROGRESS_EVERY - 0.01 for a, b in itertools.pairwise(stamps))
    # each sample but the last was sent before the next fell due, within PROGRESS_SECONDS (the last
    # fell due within them too, but its thread may have waited for a CPU)
    assert stamps[-2] - stamps[0] < PROGRESS_SECONDS


def test_a_ring_after_the_doorbell_is_closed_writes_nowhere():
    """A request's HTTP thread may ring after the run closed its control server: no error, and no byte
    into whatever file took the pipe's descriptor since."""
    bell = Doorbell()
    bell.ring()
    bell.close()
    bell.ring()
    bell.close()


def test_a_worker_starts_load_only_once_its_consumers_paused_from_the_start_have_left_their_poll(tmp_path, monkeypatch):
    """The Update that pauses consumers comes before StartLoad: the worker lets producers start only
    once no consumer is inside its poll loop (a poll under way would take the load's first records).
    It waits at most PAUSE_SECONDS, 120 s here, not 5: the timer's thread may wait seconds for a CPU."""
    from types import SimpleNamespace

    from dimster.workload.model import Workload

    monkeypatch.setattr("dimster.worker.process.PAUSE_SECONDS", 120.0)

    _ours, theirs = multiprocessing.Pipe()
    assignment = Assignment(0, "127.0.0.1:1", {"name": "w"}, [], [], 1, 5, str(tmp_path / "worker.log"), "4.4.0")
    worker = Worker(PipeChannel(theirs), assignment)
    worker.workload = Workload.model_validate({"name": "w", "consumersPaused": True})
    polling = threading.Event()
    polling.set()
    worker.consumers.append(SimpleNamespace(polling=polling))  # a consumer still inside a poll
    threading.Timer(0.3, polling.clear).start()  # its poll returns, it sees the pause and leaves
    worker._start_load(StartLoad(1000.0))
    assert not polling.is_set() and worker.load_started == 1000.0
