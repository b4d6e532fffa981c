"""Clock offset estimation: pure arithmetic on probe timestamps."""

import pytest

from dimster.coordinator.workers.clocks import ClockEstimate, clock_sample

pytestmark = pytest.mark.unit


def test_symmetric_delay_gives_the_exact_offset():
    # agent 0.3 s ahead; 2 ms each way
    sample = clock_sample(sent=100.0, agent_time=100.302, received=100.004)
    assert sample.offset == pytest.approx(0.3) and sample.round_trip == pytest.approx(0.004)


def test_the_shortest_round_trip_wins_and_bounds_the_error():
    estimate = ClockEstimate()
    # a probe that queued 80 ms on the way back skews its offset by 40 ms
    estimate.add(clock_sample(100.0, 100.302, 100.084))
    estimate.add(clock_sample(101.0, 101.3005, 101.001))
    estimate.add(clock_sample(102.0, 102.31, 102.02))
    assert estimate.offset == pytest.approx(0.3, abs=1e-9)
    assert estimate.uncertainty == pytest.approx(0.0005)
    assert estimate.as_record() == {"offset_ms": 300.0, "uncertainty_ms": 0.5, "samples": 3}


def test_old_samples_age_out():
    estimate = ClockEstimate(keep=2)
    estimate.add(clock_sample(0.0, 0.5, 0.0002))  # the clock was then 0.5 s ahead (stepped since)
    estimate.add(clock_sample(1.0, 1.1, 1.01))
    estimate.add(clock_sample(2.0, 2.1, 2.01))
    assert estimate.offset == pytest.approx(0.095)


def test_no_sample_means_no_claim():
    estimate = ClockEstimate()
    assert estimate.offset == 0.0 and estimate.as_record()["uncertainty_ms"] is None
