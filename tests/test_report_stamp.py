"""A worker's report carries the moment its clients' counts were taken. Every rate read off reports
divides a report's counts by the time since the one before; a report stamped later than its counts
(after its memory, CPU and wake-lag figures, each of which may wait for the interpreter's lock behind
a pacing thread) made a steady 100,000 msg/s read as seconds 1-2 % apart (docs/benchmarks.md)."""

import multiprocessing

import pytest

from dimster.worker import clock
from dimster.worker.process import PipeChannel, Worker
from dimster.worker.protocol import Assignment, ClientInterval, Reported
from tests.held_clock import HeldClock

pytestmark = pytest.mark.unit


class SteadyProducer:
    """A client that sent exactly 1,000 records each time its interval was taken."""

    error = None

    def __init__(self, clock: HeldClock):
        self.clock, self.taken_at = clock, []

    def take_interval(self):
        self.taken_at.append(self.clock.now)
        return ClientInterval("p0", "producer", "t", sent=1000, target_rate=1000.0), {}


def test_a_report_is_stamped_when_its_counts_are_taken_not_when_it_is_sent(tmp_path, monkeypatch):
    held = HeldClock(1000.0)
    monkeypatch.setattr(clock, "now", held.time)  # the coordinator's clock, as the worker reads it
    ours, theirs = multiprocessing.Pipe()
    assignment = Assignment(0, "127.0.0.1:1", {"name": "w"}, [], [], 1, 5, str(tmp_path / "worker.log"), "4.4.0")
    worker = Worker(PipeChannel(theirs), assignment)
    measure_lag = worker.wake_probe.take
    waits = iter([0.25, 0.0])  # the first report's figures after the counts waited a quarter of a second

    def lag_after_a_wait():
        held.now += next(waits)
        return measure_lag()

    monkeypatch.setattr(worker.wake_probe, "take", lag_after_a_wait)
    producer = SteadyProducer(held)
    coordinator = PipeChannel(ours)
    worker.report([producer])
    held.now = 1001.0  # a second after the first counts were taken
    worker.report([producer])
    stamps = []
    for _ in range(2):
        message = coordinator.recv()
        assert isinstance(message, Reported)
        stamps.append(message.report.end_time)
    assert producer.taken_at == [1000.0, 1001.0]
    assert stamps == [1000.0, 1001.0]  # not 1000.25: the second report spans 1 s, its 1,000 records at 1,000/s
