"""scripts/bench/pacing_threads.py: both ways of pacing keep the schedule's count (every record that
fell due, each once) and say what they measured; a loop whose members left leaves no thread behind."""

import threading

import pytest

from tests.bench import bench_script
from tests.waiting import until

pytestmark = pytest.mark.unit

pacing_threads = bench_script("pacing_threads")


@pytest.mark.parametrize("pacing", ["thread each", "one loop"])
def test_each_way_of_pacing_passes_every_record_that_fell_due_once(pacing):
    case = {"pacing": pacing, "producers": 3, "rate": 3000.0}
    result = pacing_threads.run_case(case, seconds=0.5)
    # each producer's 500, but for a fraction of a record carried over
    assert 1500 - 3 <= result["records"] <= 1500
    # the passes of the way measured took them, not only the catch-up pass at the case's end
    assert result["records_passed_before_the_end"] > 0
    # the loop's thread ends at its next round, 50 ms after its members left when it gets a CPU
    assert until(lambda: not [t for t in threading.enumerate() if t.name == "pacing-bench"])
