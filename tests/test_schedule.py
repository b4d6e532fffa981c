"""Producer rates over time (`rate_at`) and due times of messages (`Pacer`), on made-up clocks."""

import math
import random

import pytest

from dimster.workload.model import RateSchedule
from dimster.workload.schedule import Pacer, rate_at

pytestmark = pytest.mark.unit


def schedule(*segments: dict, type: str = "ONCE") -> RateSchedule:
    return RateSchedule.model_validate({"type": type, "segments": list(segments)})


def const(rate: float, seconds: float) -> dict:
    return {"rate": rate, "durationSeconds": seconds}


def ramp(from_rate: float, to_rate: float, seconds: float) -> dict:
    return {"fromRate": from_rate, "toRate": to_rate, "durationSeconds": seconds}


# rate_at


@pytest.mark.parametrize("elapsed", [0.0, 1.5, 1e6])
def test_no_schedule_is_the_constant_rate(elapsed):
    assert rate_at(None, 250.0, elapsed) == 250.0


def test_constant_segments_in_turn():
    s = schedule(const(100, 10), const(300, 5))
    assert rate_at(s, 0, 0.0) == 100
    assert rate_at(s, 0, 9.999) == 100
    assert rate_at(s, 0, 10.0) == 300  # a segment starts exactly at its start
    assert rate_at(s, 0, 14.9) == 300


def test_constant_rate_argument_is_ignored_under_a_schedule():
    assert rate_at(schedule(const(7, 1)), 999.0, 0.5) == 7


def test_ramp_is_linear():
    s = schedule(ramp(100, 200, 10))
    for elapsed, expected in [(0, 100), (2.5, 125), (5, 150), (9, 190)]:
        assert rate_at(s, 0, elapsed) == pytest.approx(expected)


def test_ramp_down_and_from_zero():
    assert rate_at(schedule(ramp(1000, 0, 4)), 0, 3) == pytest.approx(250)
    assert rate_at(schedule(ramp(0, 80, 8)), 0, 2) == pytest.approx(20)


def test_ramp_after_a_constant_segment_starts_at_its_own_origin():
    s = schedule(const(50, 10), ramp(0, 100, 10))
    assert rate_at(s, 0, 10) == pytest.approx(0)
    assert rate_at(s, 0, 15) == pytest.approx(50)


@pytest.mark.parametrize(
    ("last", "expected"),
    [(const(300, 5), 300), (ramp(100, 400, 5), 400)],
    ids=["constant", "ramp"],
)
def test_once_holds_the_last_rate_after_the_end(last, expected):
    s = schedule(const(10, 5), last)
    for elapsed in (10.0, 10.001, 1e4):
        assert rate_at(s, 0, elapsed) == pytest.approx(expected)


def test_repeating_wraps_around():
    s = schedule(const(100, 10), ramp(0, 100, 10), type="REPEATING")
    for cycle in range(3):
        base = cycle * 20
        assert rate_at(s, 0, base + 3) == 100
        assert rate_at(s, 0, base + 15) == pytest.approx(50)
    assert rate_at(s, 0, 20.0) == 100  # the start of the next cycle, not the end of the ramp


def test_repeating_single_segment():
    assert rate_at(schedule(const(42, 3), type="REPEATING"), 0, 1e6 + 0.5) == 42


@pytest.mark.parametrize("kind", ["ONCE", "REPEATING"])
def test_end_of_schedule_survives_float_rounding(kind):
    # 5.86 + 8.33 + 7.9 sums to 22.090000000000003 in floats, so 22.09 is "before the end" but
    # past the last segment once the earlier durations are taken off
    s = schedule(const(1, 5.86), const(2, 8.33), const(5, 7.9), type=kind)
    assert sum((5.86, 8.33, 7.9)) > 22.09
    assert rate_at(s, 0, 22.09) == 5
    ramped = schedule(const(1, 5.86), const(2, 8.33), ramp(3, 9, 7.9), type=kind)
    assert rate_at(ramped, 0, 22.09) == pytest.approx(9)


def test_rate_never_falls_to_zero_between_nonzero_segments():
    rng = random.Random(7)
    for _ in range(300):
        durations = [round(rng.uniform(0.05, 10), rng.randint(1, 3)) for _ in range(rng.randint(1, 4))]
        s = schedule(*(const(10, d) for d in durations))
        total = sum(durations)
        for elapsed in (0.0, math.nextafter(total, 0), total, rng.uniform(0, total)):
            assert rate_at(s, 0, elapsed) == 10, (durations, elapsed)


# Pacer


def test_pacer_evenly_spaced_due_times():
    pacer = Pacer(start=100.0)
    times = pacer.due(101.0, 10)
    assert times == pytest.approx([100.0 + i / 10 for i in range(1, 11)])


def test_pacer_nothing_due_before_the_first_interval():
    pacer = Pacer(start=0.0)
    assert pacer.due(0.05, 10) == []
    assert pacer.next_due(10) == pytest.approx(0.1)


def test_pacer_carries_fractional_credit_across_calls():
    pacer = Pacer(start=0.0)
    assert pacer.due(0.25, 10) == pytest.approx([0.1, 0.2])
    assert pacer.next_due(10) == pytest.approx(0.3)
    assert pacer.due(0.5, 10) == pytest.approx([0.3, 0.4, 0.5])


def test_pacer_any_call_pattern_gives_the_same_schedule():
    """Due times depend on the rate only, not on how often the sender asks."""
    rate, end = 37.0, 20.0
    pacer = Pacer(start=0.0)
    times = []
    rng = random.Random(3)
    now = 0.0
    while now < end:
        now = min(end, now + rng.expovariate(5))
        times += pacer.due(now, rate)
    times += pacer.due(end + 1e-9, rate)  # a message due exactly at `end` may wait for float rounding
    expected = [(i + 1) / rate for i in range(math.floor(end * rate + 1e-9))]
    assert len(times) == len(expected)
    assert times == pytest.approx(expected, abs=1e-9)


def test_pacer_due_times_are_increasing_and_not_in_the_future():
    pacer = Pacer(start=0.0)
    now, previous = 0.0, -1.0
    rng = random.Random(11)
    for _ in range(2000):
        now += rng.uniform(0, 0.01)
        rate = rng.choice([0.0, 5.0, 100.0, 3000.0])
        for t in pacer.due(now, rate):
            assert previous < t <= now + 1e-9
            previous = t


def test_pacer_follows_a_rate_change():
    pacer = Pacer(start=0.0)
    first = pacer.due(1.0, 10)
    second = pacer.due(2.0, 20)
    assert len(first) == 10 and len(second) == 20
    assert second[0] == pytest.approx(1.05)
    assert second[-1] == pytest.approx(2.0)


def test_pacer_rate_change_keeps_credit_in_messages():
    pacer = Pacer(start=0.0)
    assert pacer.due(0.15, 10) == pytest.approx([0.1])  # half a message of credit left
    # at 100 msg/s the missing half message takes 5 ms
    assert pacer.next_due(100) == pytest.approx(0.155)
    assert pacer.due(0.178, 100) == pytest.approx([0.155, 0.165, 0.175])


def test_pacer_zero_rate_pauses_and_drops_credit():
    pacer = Pacer(start=0.0)
    pacer.due(0.15, 10)  # credit 0.5
    assert pacer.due(5.0, 0) == []
    assert pacer.next_due(0) == pytest.approx(5.05)  # poll again soon
    # nothing is owed for the pause, and the dropped half message is not carried over
    assert pacer.due(5.27, 10) == pytest.approx([5.1, 5.2])


def test_pacer_negative_rate_is_a_pause():
    pacer = Pacer(start=0.0)
    assert pacer.due(1.0, -5) == []
    assert pacer.due(1.23, 10) == pytest.approx([1.1, 1.2])


def test_pacer_clock_going_backwards_gives_nothing_and_keeps_credit():
    pacer = Pacer(start=0.0)
    pacer.due(1.05, 10)
    assert pacer.due(0.5, 10) == []
    assert pacer.due(1.05, 10) == []
    assert pacer.due(1.23, 10) == pytest.approx([1.1, 1.2])


def test_pacer_limit_skips_nothing():
    """Far behind, the pacer hands out at most `limit` times per call and resumes after the last."""
    pacer = Pacer(start=0.0)
    batches = []
    while True:
        batch = pacer.due(10.0, 100, limit=64)
        if not batch:
            break
        assert len(batch) <= 64
        batches.append(batch)
    times = [t for batch in batches for t in batch]
    assert len(times) == 1000
    assert times == pytest.approx([(i + 1) / 100 for i in range(1000)])
    assert len(batches[0]) == 64


def test_pacer_limit_then_catch_up_continues_the_sequence():
    pacer = Pacer(start=0.0)
    assert pacer.due(100.0, 10, limit=5) == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert pacer.next_due(10) == pytest.approx(0.6)
    rest = pacer.due(100.0, 10)
    assert len(rest) == 995
    assert rest[0] == pytest.approx(0.6)
    assert rest[-1] == pytest.approx(100.0)


def test_pacer_next_due_matches_the_next_due_time():
    pacer = Pacer(start=0.0)
    pacer.due(0.333, 7)
    expected = pacer.next_due(7)
    times = pacer.due(expected + 1e-9, 7)
    assert times == pytest.approx([expected])
