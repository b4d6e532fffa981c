"""scripts/bench/coordinator_memory.py simulates a long share-group run on the coordinator's aggregate:
its account must close, and what the aggregate holds must follow the fold horizon, not the run's length."""

import argparse
import subprocess
import sys
import time

import psutil
import pytest

from tests.bench import BENCH, bench_script

pytestmark = pytest.mark.unit

coordinator_memory = bench_script("coordinator_memory")


def simulated(report_seconds: int, feed_process: bool) -> tuple[object, list[int]]:
    """4 producers and 4 share consumers at 20,000 records/s for 4 simulated minutes: the aggregate,
    and the ranges it held after each minute."""
    args = argparse.Namespace(
        rate=20_000, reject=0.05, release=0.05, producers=4, consumers=4, lock_ms=30_000, keep_all=False,
        report_seconds=report_seconds, minutes=4, feed_process=feed_process,
    )  # fmt: skip
    aggregate = coordinator_memory.run_aggregate(args)
    held = []
    for interval, reports in enumerate(coordinator_memory.reports_made(args)):
        for report in reports:
            aggregate.add(report)
        if (interval + 1) * report_seconds % 60 == 0:
            held.append(coordinator_memory.ranges_kept(aggregate)[0])
    return aggregate, held


@pytest.mark.parametrize("report_seconds", [60, 10])
def test_the_simulated_account_closes_and_what_is_held_follows_the_horizon_not_the_length(report_seconds):
    """5 % rejected and 5 % released on delivery 1 (accepted on delivery 2), reports of a minute or of
    10 s: every record acknowledged is settled once, the rejected are the draws' 5 %, nothing folded
    comes back, and the ranges held after 4 simulated minutes are those after 3 (a 60-s horizon)."""
    aggregate, held = simulated(report_seconds, feed_process=False)
    records = 4 * 60 * 20_000
    assert aggregate.acked == aggregate.settled_by_group["g"] == records and aggregate.duplicates == 0
    assert 0.048 * records < aggregate.outcomes.count("rejected", "g") < 0.052 * records
    assert aggregate.outcomes.late == 0
    assert held[1] > 0 and abs(held[3] - held[2]) < 0.05 * held[2]  # minutes 3 and 4 hold as much


def test_reports_made_in_a_process_of_their_own_are_those_made_here():
    """--feed-process: the same reports, in the same order (the same seed), whatever process makes them."""
    here, held_here = simulated(10, feed_process=False)
    there, held_there = simulated(10, feed_process=True)
    assert held_there == held_here
    assert there.outcomes.count("rejected", "g") == here.outcomes.count("rejected", "g") > 0
    for count in ("acked", "received", "accepted", "released", "rejected"):
        assert getattr(there, count) == getattr(here, count) > 0, count


def test_the_report_maker_ends_when_the_curves_process_is_killed():
    """A curve stopped with kill (no `finally` runs) leaves no process behind: its report maker, held
    on a full queue, ends with its parent."""
    curve = subprocess.Popen(
        [sys.executable, str(BENCH / "coordinator_memory.py"), "--minutes", "50", "--rate", "100000",
         "--report-seconds", "1", "--feed-process"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    makers: list[psutil.Process] = []
    try:
        assert curve.stdout is not None and curve.stdout.readline().startswith("minute 0")
        deadline = time.monotonic() + 30
        while not (makers := psutil.Process(curve.pid).children()) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        curve.kill()
        curve.wait()
        if curve.stdout:
            curve.stdout.close()
    left = psutil.wait_procs(makers, timeout=20)[1]
    for process in left:  # a maker left behind, ended here rather than kept
        process.kill()
    assert len(makers) == 1 and left == []


HEAP_CHILD = """
import ctypes, sys
sys.path.insert(0, sys.argv[2])
from coordinator_memory import large_allocations_off_the_heap

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
took = large_allocations_off_the_heap() if sys.argv[1] == "off the heap" else None
big = bytearray(8 << 20)
del big  # glibc's own bound rises to 8 MiB when an allocation of its own pages is freed
before = libc.mallinfo2().hblks
held = [bytearray(1 << 20) for _ in range(4)]
print(took, libc.mallinfo2().hblks - before)
"""


@pytest.mark.parametrize("setting", ["off the heap", "as is"])
def test_off_the_heap_large_allocations_keep_pages_of_their_own_after_a_larger_one_was_freed(setting):
    """--off-the-heap (the experiment behind the curves of docs/benchmarks.md): after a freed 8 MiB
    block, each of four 1 MiB ones still gets pages of its own; as glibc is, its bound raised to 8 MiB
    by the free, all four come from its heap."""
    command = [sys.executable, "-c", HEAP_CHILD, setting, str(BENCH)]
    took, own_pages = subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()
    assert (took, int(own_pages)) == (("True", 4) if setting == "off the heap" else ("None", 0))
