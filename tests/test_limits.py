"""What limits a share group (diagnosis/limits.py): each limit's formula on numbers a person can check,
the seed's own case first, and a diagnosis only when the prediction is within 15 % of the measured rate."""

from dataclasses import replace

import pytest

from dimster.diagnosis.limits import (
    GroupInputs,
    acquired_per_fetch,
    diagnose,
    fetch_waits,
    lock_budget,
    per_consumer_rate,
    processing_capacity,
)

pytestmark = pytest.mark.unit

# shared seed 001: 300 + 12 consumers at 5 ms on 6 partitions, max.poll.records 30, 64-record batches
SEED = GroupInputs(
    partitions=6, consumers=312, proc_ms=5.0, parallelism=1, max_poll_records=30,
    acquire_mode="batch_optimized", record_locks=2000, records_per_batch=64.0, records_per_poll=30.0,
)  # fmt: skip
# the issue's run: 12 consumers at 5 ms on 3 partitions, about 52-record batches, 100 locks
SMALL = GroupInputs(
    partitions=3, consumers=12, proc_ms=5.0, parallelism=1, max_poll_records=50,
    acquire_mode="batch_optimized", record_locks=100, records_per_batch=52.0, records_per_poll=40.0,
)  # fmt: skip


def test_the_seed_s_lock_budget_admits_ceil_2000_over_64_consumers_per_partition():
    limit = lock_budget(SEED)
    assert limit is not None and limit.name == "lock budget"
    assert (limit.inputs["busyPerPartition"], limit.inputs["consumersPerPartition"]) == (32, 52)
    assert limit.rate == 32 * 6 * 200  # 38,400 msg/s; the seed's floor(2000/64) gives 37,200
    assert "2000 / 64-record batches -> 32 of 52 consumers busy per partition" in limit.sentence
    d = diagnose(SEED, measured=37_000, offered=60_000)
    assert d.limit is not None and d.limit.name == "lock budget" and "measured 37,000" in d.line()
    assert "groupConfig.share.partition.max.record.locks" in d.line()


@pytest.mark.parametrize(
    "fix",
    [
        {"record_locks": 4000},  # the seed's fix 1: a larger budget
        {"acquire_mode": "record_limit"},  # fix 2: 30 records a fetch, 67 fetches admitted
        {"records_per_batch": 32.0},  # batch.size back to 16 KB
    ],
)
def test_each_of_the_seed_s_fixes_lifts_the_lock_budget(fix):
    fixed = replace(SEED, **fix)
    assert lock_budget(fixed) is None
    assert diagnose(fixed, measured=60_000, offered=60_000).limit.name == "processing capacity"  # type: ignore[union-attr]


def test_a_fetch_acquires_whole_batches_up_to_max_poll_records_or_max_poll_records_in_record_limit():
    assert acquired_per_fetch(replace(SMALL, max_poll_records=500)) == 520  # 10 batches of 52
    assert acquired_per_fetch(SMALL) == 52  # one batch reaches 50
    assert acquired_per_fetch(replace(SMALL, acquire_mode="record_limit")) == 50
    assert acquired_per_fetch(replace(SMALL, records_per_batch=None)) is None


def test_the_issue_s_run_allows_2_of_4_consumers_per_partition_and_a_live_budget_of_400_lifts_it():
    limit = lock_budget(SMALL)
    assert limit is not None and limit.rate == 2 * 3 * 200 == 1200
    assert lock_budget(replace(SMALL, record_locks=400)) is None  # ceil(400 / 52) = 8 >= 4
    one_budget = lock_budget(replace(SMALL, max_poll_records=500))  # 520 a fetch: one consumer holds all 100
    assert one_budget is not None and one_budget.rate == 1 * 3 * 200


def test_processing_capacity_counts_lanes_and_a_whole_poll_at_once():
    assert processing_capacity(SMALL).rate == 12 * 200  # type: ignore[union-attr]
    assert processing_capacity(replace(SMALL, parallelism=4)).rate == 12 * 800  # type: ignore[union-attr]
    assert processing_capacity(replace(SMALL, parallelism=-1)).rate == 12 * 40 * 200  # type: ignore[union-attr]
    assert processing_capacity(replace(SMALL, proc_ms=0.0)) is None and lock_budget(replace(SMALL, proc_ms=0.0)) is None


def test_fetch_waits_bind_record_limit_with_fewer_consumers_than_partitions():
    stall = replace(SMALL, consumers=2, partitions=6, acquire_mode="record_limit", proc_ms=0.0)
    limit = fetch_waits(stall)
    assert limit is not None and limit.rate == 2 * 50 * 1000 / 500  # the stall scenario's 200 msg/s floor
    assert fetch_waits(replace(stall, acquire_mode="batch_optimized")) is None
    assert fetch_waits(replace(stall, consumers=6)) is None


@pytest.mark.parametrize(
    ("measured", "explained"), [(1200, True), (1050, True), (1380, True), (1000, False), (2000, False)]
)
def test_a_diagnosis_names_a_limit_only_within_15_percent_of_the_measured_rate(measured, explained):
    d = diagnose(SMALL, measured=measured, offered=2000)
    assert (d.limit is not None) == explained
    if not explained:
        assert d.name == "unexplained" and "is unexplained (lock budget allows 1,200" in d.line()
        assert "processing capacity allows 2,400" in d.line()


def test_no_limit_computed_is_still_said_plainly():
    d = diagnose(replace(SMALL, proc_ms=0.0), measured=500, offered=2000, notes=("threads waited",))
    assert d.limit is None and d.limits == () and d.line().endswith("(no limit computed); threads waited")


def test_the_whole_poll_at_once_takes_its_slowest_record():
    """Parallelism -1, or lanes for every record of a poll: a poll of 40 records at 0 to 10 ms takes
    the expected slowest of 40 uniform times, 10 x 40 / 41 ms; fewer lanes than records use the mean."""
    spread = replace(SMALL, proc_ms=5.0, proc_ms_max=10.0, records_per_poll=40.0)
    assert per_consumer_rate(replace(spread, parallelism=-1)) == pytest.approx(40 * 1000 / (10 * 40 / 41))
    assert per_consumer_rate(replace(spread, parallelism=100)) == per_consumer_rate(replace(spread, parallelism=-1))
    assert per_consumer_rate(replace(spread, parallelism=4)) == 4 * 1000 / 5.0
    assert per_consumer_rate(replace(spread, parallelism=1)) == 1000 / 5.0
