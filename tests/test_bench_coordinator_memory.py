"""scripts/bench/coordinator_memory.py simulates a long share-group run on the coordinator's aggregate:
its account must close, and what the aggregate holds must follow the fold horizon, not the run's length."""

import argparse

import pytest

from tests.bench import bench_script

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
