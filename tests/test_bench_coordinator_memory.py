"""scripts/bench/coordinator_memory.py simulates a long share-group run on the coordinator's aggregate:
its account must close, and what the aggregate holds must follow the fold horizon, not the run's length."""

import argparse

import numpy as np
import pytest

from tests.bench import bench_script

pytestmark = pytest.mark.unit

coordinator_memory = bench_script("coordinator_memory")


@pytest.mark.parametrize("report_seconds", [60, 10])
def test_the_simulated_account_closes_and_what_is_held_follows_the_horizon_not_the_length(report_seconds):
    """4 producers and 4 share consumers at 20,000 records/s, 5 % rejected and 5 % released on delivery
    1 (accepted on delivery 2), reports of a minute or of 10 s: every record acknowledged is settled
    once, the rejected are the draws' 5 %, nothing folded comes back, and the ranges held after 4
    simulated minutes are those after 3 (a 60-s horizon)."""
    args = argparse.Namespace(
        rate=20_000, reject=0.05, release=0.05, producers=4, consumers=4, lock_ms=30_000, keep_all=False,
        report_seconds=report_seconds,
    )  # fmt: skip
    rng = np.random.default_rng(48)
    aggregate = coordinator_memory.run_aggregate(args)
    held = []
    for interval in range(4 * 60 // report_seconds):
        for report in coordinator_memory.interval_reports(interval, args, rng):
            aggregate.add(report)
        if (interval + 1) * report_seconds % 60 == 0:
            held.append(coordinator_memory.ranges_kept(aggregate)[0])
    records = 4 * 60 * 20_000
    assert aggregate.acked == aggregate.settled_by_group["g"] == records and aggregate.duplicates == 0
    assert 0.048 * records < aggregate.outcomes.count("rejected", "g") < 0.052 * records
    assert aggregate.outcomes.late == 0
    assert held[1] > 0 and abs(held[3] - held[2]) < 0.05 * held[2]  # minutes 3 and 4 hold as much
