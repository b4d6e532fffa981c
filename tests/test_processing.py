"""Simulated consumer processing: per-record times and how long a poll keeps a consumer busy."""

import random

import pytest

from dimster.workload.processing import makespan_ms, processing_times_ms

pytestmark = pytest.mark.unit

# processing_times_ms


def test_no_processing_time():
    assert processing_times_ms(5, 0, 0, random.Random(0)) == [0.0] * 5


def test_fixed_processing_time():
    assert processing_times_ms(4, 2.5, 2.5, random.Random(0)) == [2.5] * 4


def test_zero_records():
    assert processing_times_ms(0, 1, 5, random.Random(0)) == []


def test_uniform_processing_times_stay_in_range_and_spread():
    times = processing_times_ms(20_000, 2.0, 10.0, random.Random(1))
    assert len(times) == 20_000
    assert all(2.0 <= t <= 10.0 for t in times)
    assert sum(times) / len(times) == pytest.approx(6.0, abs=0.1)
    assert min(times) < 2.1 and max(times) > 9.9


def test_processing_times_follow_the_rng():
    assert processing_times_ms(10, 1, 3, random.Random(7)) == processing_times_ms(10, 1, 3, random.Random(7))


# makespan_ms


def greedy_makespan(times: list[float], lanes: int) -> float:
    """Reference: each record, in order, starts on the lane that frees up first."""
    free_at = [0.0] * lanes
    for duration in times:
        lane = free_at.index(min(free_at))
        free_at[lane] += duration
    return max(free_at)


def test_empty_poll_takes_no_time():
    for parallelism in (1, 4, -1):
        assert makespan_ms([], parallelism) == 0.0


def test_serial_is_the_sum():
    assert makespan_ms([1.0, 2.0, 3.5], 1) == 6.5


def test_whole_poll_at_once_is_the_longest():
    assert makespan_ms([1.0, 7.0, 3.0], -1) == 7.0


def test_more_lanes_than_records_is_the_longest():
    assert makespan_ms([1.0, 7.0, 3.0], 3) == 7.0
    assert makespan_ms([1.0, 7.0, 3.0], 50) == 7.0


@pytest.mark.parametrize(
    ("times", "lanes", "expected"),
    [
        ([5, 1, 1, 1, 1, 1], 2, 5),  # the short ones fill the second lane
        ([3, 3, 3], 2, 6),
        ([1, 1, 1, 1, 10], 2, 12),  # in order: the long last record lands on a busy lane
        ([4, 4, 4, 4], 2, 8),
        ([2, 9, 2, 2, 2], 3, 9),
    ],
)
def test_lanes_take_records_in_order(times, lanes, expected):
    assert makespan_ms([float(t) for t in times], lanes) == expected


def test_random_polls_match_the_greedy_reference():
    rng = random.Random(3)
    for _ in range(300):
        times = processing_times_ms(rng.randint(1, 60), 0.5, 20.0, rng)
        lanes = rng.randint(1, 70)
        expected = greedy_makespan(times, min(lanes, len(times)))
        assert makespan_ms(times, lanes) == pytest.approx(expected)


def test_makespan_bounds():
    """Never shorter than the longest record or the even share, never longer than serial."""
    rng = random.Random(4)
    for _ in range(200):
        times = processing_times_ms(rng.randint(1, 40), 0.0, 10.0, rng)
        lanes = rng.randint(1, 10)
        span = makespan_ms(times, lanes)
        assert max(times) - 1e-9 <= span <= sum(times) + 1e-9
        assert span >= sum(times) / lanes - 1e-9


def test_more_lanes_never_slower_on_equal_records():
    times = [2.0] * 24
    spans = [makespan_ms(times, lanes) for lanes in (1, 2, 3, 4, 6, 8, 12, 24, -1)]
    assert spans == [48.0, 24.0, 16.0, 12.0, 8.0, 6.0, 4.0, 2.0, 2.0]
