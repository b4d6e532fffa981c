"""Latency histograms: percentiles within 1% of the exact ones, merging, the wire form,
and a bucket count that follows the spread of values rather than their number.

The exact reference is the "inverted CDF" percentile (the smallest value with at least q% of the
values at or below it), as np.percentile(method="inverted_cdf") defines it. Its rank is computed
with exact fractions: in floats 99.9 / 100 * 100000 lands above 99900 and numpy picks rank 99901.
"""

import math
import pickle
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dimster.coordinator.account.self_cost import latency_brief
from dimster.metrics.histogram import ALPHA, BUFFER, FEW, Histogram, bucket_of, bucket_value
from dimster.pipeline.latency import bucket_percentiles

pytestmark = pytest.mark.unit

QUANTILES = [50, 75, 90, 95, 99, 99.9, 99.99]
QUANTILE_COLUMNS = ["p50", "p75", "p90", "p95", "p99", "p99_9", "p99_99"]  # the summary's names
N = 100_000


def exact_percentile(sorted_values: np.ndarray, q: float) -> float:
    rank = max(1, math.ceil(Fraction(str(q)) * len(sorted_values) / 100))
    return float(sorted_values[rank - 1])


def count(histogram: Histogram) -> int:
    """Values recorded so far (`total` alone leaves out those still in the buffer)."""
    return histogram.to_wire()[1]


def histogram_of(values) -> Histogram:
    histogram = Histogram()
    histogram.record_many(values)
    return histogram


def assert_close(estimate: float, exact: float) -> None:
    assert abs(estimate - exact) <= (ALPHA + 1e-9) * exact, (estimate, exact, estimate / exact - 1)


def lognormal(rng):
    return rng.lognormal(mean=7.0, sigma=1.5, size=N)  # ~1 ms median, tail to seconds


def uniform(rng):
    return rng.uniform(100.0, 50_000.0, size=N)


def bimodal(rng):
    fast = rng.normal(500.0, 40.0, size=N * 9 // 10)
    slow = rng.normal(80_000.0, 9_000.0, size=N - len(fast))
    return np.clip(rng.permutation(np.concatenate([fast, slow])), 1.0, None)


@pytest.mark.parametrize("sample", [lognormal, uniform, bimodal])
def test_percentiles_within_one_percent(sample):
    values = sample(np.random.default_rng(42))
    histogram = histogram_of(values)
    ordered = np.sort(values)
    for q in QUANTILES:
        assert_close(histogram.percentile(q), exact_percentile(ordered, q))
    assert histogram.max == ordered[-1]
    assert histogram.min == ordered[0]
    assert_close(histogram.percentile(100), ordered[-1])
    assert count(histogram) == N


def test_reference_agrees_with_numpy_inverted_cdf():
    values = np.sort(lognormal(np.random.default_rng(5)))
    for q in (50, 90, 99, 99.99):  # quantiles whose rank numpy computes without rounding trouble
        assert exact_percentile(values, q) == np.percentile(values, q, method="inverted_cdf")


def test_percentile_rank_is_exact():
    """The rank of q% of n values is ceil(q * n / 100), not one more through float rounding."""
    histogram = histogram_of([100.0] * 999 + [10_000.0])
    assert histogram.percentile(99.9) == pytest.approx(100, rel=ALPHA)  # rank 999 of 1000, not the maximum
    assert histogram.percentile(99.91) == pytest.approx(10_000, rel=ALPHA)
    tenths = histogram_of([100.0] * 99_990 + [10_000.0] * 10)
    assert tenths.percentile(99.99) == pytest.approx(100, rel=ALPHA)
    assert tenths.percentile(99.991) == pytest.approx(10_000, rel=ALPHA)


def test_percentiles_on_a_few_values_are_clamped_to_min_and_max():
    histogram = histogram_of([1234.5])
    for q in (0, 50, 99.99, 100):
        assert histogram.percentile(q) == 1234.5
    two = histogram_of([10.0, 2000.0])
    assert two.percentile(50) == pytest.approx(10, rel=ALPHA)
    assert two.percentile(51) == pytest.approx(2000, rel=ALPHA)


def test_values_below_one_share_the_first_bucket():
    histogram = histogram_of([0.0, 0.2, 0.9])
    assert len(histogram.to_wire()[0]) == 1
    assert histogram.percentile(50) == 0.9  # clamped to the maximum
    assert histogram_of([0.0]).percentile(99) == 0.0


def test_empty_histogram():
    histogram = Histogram()
    assert histogram.percentile(50) is None
    assert histogram.to_wire() == ({}, 0, math.inf, -math.inf)


def test_bucket_representative_is_within_alpha_of_its_bucket():
    rng = np.random.default_rng(8)
    values = np.exp(rng.uniform(0, math.log(1e9), size=50_000))
    representatives = bucket_value(bucket_of(values))
    assert np.all(np.abs(representatives - values) <= (ALPHA + 1e-9) * values)


def test_buffered_values_count_before_a_flush():
    histogram = Histogram()
    histogram.record(100.0)
    histogram.record(300.0)
    assert histogram.percentile(100) == 300.0
    assert count(histogram) == 2


def test_crossing_the_buffer_size_loses_nothing():
    values = np.arange(1, 3 * BUFFER + 18, dtype=float)
    histogram = histogram_of(values)
    assert count(histogram) == len(values)
    assert sum(histogram.to_wire()[0].values()) == len(values)


def test_merge_equals_histogram_of_concatenated_data():
    rng = np.random.default_rng(3)
    parts = [lognormal(rng)[: 10_000 + 7 * i] for i in range(4)] + [uniform(rng)[:5]]
    merged = Histogram()
    for part in parts:
        merged.merge(histogram_of(part))
    together = histogram_of(np.concatenate(parts))
    assert merged.to_wire() == together.to_wire()
    for q in [*QUANTILES, 100]:
        assert merged.percentile(q) == together.percentile(q)


def test_merge_into_a_histogram_with_unflushed_values():
    a = histogram_of([5.0, 6.0])
    b = histogram_of([7000.0])
    a.merge(b)
    assert count(a) == 3 and a.min == 5.0 and a.max == 7000.0
    assert count(b) == 1  # the merged-in histogram is left as it was


def test_merge_with_empty_histograms():
    a = histogram_of([42.0])
    a.merge(Histogram())
    assert a.to_wire() == histogram_of([42.0]).to_wire()
    empty = Histogram()
    empty.merge(histogram_of([42.0]))
    assert empty.to_wire() == histogram_of([42.0]).to_wire()


def test_wire_round_trip():
    original = histogram_of(bimodal(np.random.default_rng(4))[:20_000])
    wire = original.to_wire()
    copy = Histogram.from_wire(pickle.loads(pickle.dumps(wire)))
    assert copy.to_wire() == wire
    for q in [*QUANTILES, 100]:
        assert copy.percentile(q) == original.percentile(q)
    copy.record(1e7)  # the copy is a working histogram of its own
    assert count(copy) == count(original) + 1
    assert original.max < 1e7


def test_wire_counts_are_a_copy():
    histogram = histogram_of([10.0])
    counts, *_ = histogram.to_wire()
    counts.clear()
    assert count(histogram) == 1 and histogram.to_wire()[0]


def test_bucket_count_follows_spread_not_count():
    rng = np.random.default_rng(1)
    values = np.exp(rng.uniform(0, math.log(1e9), size=1_000_000))  # 1 us .. 1000 s, log-uniform
    histogram = histogram_of(values)
    buckets = len(histogram.to_wire()[0])
    assert buckets < 2200
    assert buckets == pytest.approx(math.log(1e9) / math.log((1 + ALPHA) / (1 - ALPHA)), abs=5)


def test_many_equal_values_use_one_bucket():
    histogram = histogram_of(np.full(50_000, 1500.0))
    assert len(histogram.to_wire()[0]) == 1
    assert histogram.percentile(99) == 1500.0


def test_summary_ms_counts_buffered_values_and_converts_to_ms():
    histogram = Histogram()
    for value_us in (1000.0, 2000.0, 3000.0):
        histogram.record(value_us)  # still in the buffer
    summary = latency_brief(histogram)
    assert summary["count"] == 3 and summary["max"] == pytest.approx(3.0, rel=0.01)
    assert summary["p50"] == pytest.approx(2.0, rel=0.01)
    assert latency_brief(Histogram()) == {"p50": None, "p99": None, "max": None, "count": 0}


def test_arrays_recorded_in_pieces_of_every_size_equal_one_array_recorded_at_once():
    values = lognormal(np.random.default_rng(7))[: 3 * BUFFER + 17]
    whole = Histogram()
    whole.record_array(values)
    pieces, at = Histogram(), 0
    for size in [1, 5, BUFFER - 6, 0, BUFFER + 3, 2, BUFFER - 1, 11]:  # fills, overflows and skips the buffer
        pieces.record_array(values[at : at + size])
        at += size
    pieces.record_array(values[at:])
    assert at < len(values) and pieces.to_wire() == whole.to_wire()
    assert pieces.to_wire()[1] == len(values)


def test_few_values_counted_one_flush_at_a_time_equal_them_counted_at_once():
    """A histogram read after every few values (a client's second) counts them in Python, not numpy."""
    values = lognormal(np.random.default_rng(11))[: 80 * FEW]
    whole = Histogram()
    whole.record_array(values)
    few, at, size = Histogram(), 0, 0
    while at < len(values):
        size = size % (FEW - 1) + 1  # 1, 2, ..., FEW - 1: always the small path
        few.record_array(values[at : at + size])
        few.to_wire()
        at += size
    assert few.to_wire() == whole.to_wire()
    assert few.to_wire()[1] == len(values) > BUFFER


def test_merged_buckets_give_each_groups_percentiles_as_its_merged_histogram_does():
    """The summary's percentiles (pipeline/latency.py): rows of several histograms per group, merged by
    bucket and read off their cumulative counts, are each group's merged Histogram's percentiles, for
    groups of very different sizes, one with a missing key, listed unsorted."""
    rng = np.random.default_rng(7)
    groups = {("a", 1.0): [lognormal(rng)[:5], uniform(rng)], ("a", 0.0): [bimodal(rng)], ("b", None): [[3_000.0]]}
    rows, merged_histograms = [], {}
    for (client, partition), samples in groups.items():
        merged = merged_histograms[(client, partition)] = Histogram()
        for values in samples:
            histogram = histogram_of(values)
            merged.merge(histogram)
            counts, _, low, high = histogram.to_wire()
            rows += [(client, partition, "e2e", b, n, low, high) for b, n in counts.items()]
    table = pd.DataFrame(rows, columns=["client", "partition", "metric", "bucket", "n", "min_us", "max_us"])
    table = table.sample(frac=1.0, random_state=1)  # the order Spark returns them in: any
    result = bucket_percentiles(
        table.groupby(["client", "partition", "metric", "bucket"], dropna=False)
        .agg(n=("n", "sum"), min_us=("min_us", "min"), max_us=("max_us", "max"))
        .reset_index(),
        ["client", "partition", "metric"],
    )
    assert len(result) == 3
    for row in result.to_dict("records"):
        key = (row["client"], None if pd.isna(row["partition"]) else row["partition"])
        histogram = merged_histograms[key]
        assert row["count"] == count(histogram)
        for name, q in zip(QUANTILE_COLUMNS, QUANTILES, strict=True):
            assert row[name] == pytest.approx(histogram.percentile(q) / 1000, rel=1e-12), (key, name)
        assert row["max"] == pytest.approx(histogram.max / 1000)


def test_merging_a_histogram_as_the_wire_carries_it_is_recording_both_sets_of_values():
    """The coordinator adds reports' histograms without making one each (merge goes the same way):
    the same counts, total, minimum, maximum and percentiles as one histogram of all the values,
    also into a histogram whose own values are not yet counted."""
    rng = np.random.default_rng(48)
    for _ in range(50):
        theirs_values, mine_values = rng.lognormal(8, 2, rng.integers(1, 300)), np.array([3.0, 7e6])
        theirs, merged, merged_by_wire, every = Histogram(), Histogram(), Histogram(), Histogram()
        theirs.record_array(theirs_values)
        every.record_array(np.concatenate((mine_values, theirs_values)))
        for mine in (merged, merged_by_wire):
            mine.record_array(mine_values)  # buffered, not yet counted
        merged_by_wire.merge_wire(theirs.to_wire())
        merged.merge(theirs)
        for h in (merged, merged_by_wire):
            assert h.to_wire() == every.to_wire()
            assert [h.percentile(q) for q in (50, 99, 100)] == [every.percentile(q) for q in (50, 99, 100)]
