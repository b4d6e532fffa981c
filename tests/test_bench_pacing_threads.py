"""scripts/bench/pacing_threads.py: both ways of pacing keep the schedule's count (every record that
fell due, each once) and say what they measured; a loop whose members left leaves no thread behind."""

import threading

import pytest

from dimster.worker import clock
from tests.bench import bench_script
from tests.waiting import until

pytestmark = pytest.mark.unit

pacing_threads = bench_script("pacing_threads")


@pytest.mark.parametrize("pacing", ["thread each", "one loop"])
def test_each_way_of_pacing_passes_every_record_that_fell_due_once(pacing, monkeypatch):
    """A thread of the niced unit tier may wait longer for a CPU than the case's 0.5 s: the case's end
    waits for the way measured to have passed records once (its clock stops short of the end until
    then, and no member leaves the loop before), so that they were not all the closing pass's."""
    members: list = []

    class Paced(pacing_threads.Paced):
        def __init__(self, rate: float, start: float):
            super().__init__(rate, start)
            self.start = start
            members.append(self)

    def passed() -> bool:
        return any(m.delays for m in members)

    def now() -> float:
        real = real_now()
        return real if passed() or not members else min(real, members[0].start + 0.25)

    waited: list[bool] = []

    class PatientLoop(pacing_threads.PacingLoop):
        def leave(self, member: object) -> None:
            if not waited:
                waited.append(until(passed))
            super().leave(member)

    real_now = clock.now
    monkeypatch.setattr(pacing_threads, "Paced", Paced)
    monkeypatch.setattr(pacing_threads, "PacingLoop", PatientLoop)
    monkeypatch.setattr(clock, "now", now)
    case = {"pacing": pacing, "producers": 3, "rate": 3000.0}
    result = pacing_threads.run_case(case, seconds=0.5)
    # each producer's 500, but for a fraction of a record carried over
    assert 1500 - 3 <= result["records"] <= 1500
    # the passes of the way measured took them, not only the catch-up pass at the case's end
    assert result["records_passed_before_the_end"] > 0
    # the loop's thread ends at its next round, 50 ms after its members left when it gets a CPU
    assert until(lambda: not [t for t in threading.enumerate() if t.name == "pacing-bench"])
