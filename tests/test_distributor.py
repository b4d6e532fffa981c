"""messageDistributor: keys and partitions each producer's messages get, and Zipf partition shares."""

import math
import random
from collections import Counter

import pytest

from dimster.workload.distributor import distributor, zipf_weights

pytestmark = pytest.mark.unit


def draw(choose, n: int) -> list:
    return [choose() for _ in range(n)]


# zipf_weights


@pytest.mark.parametrize(("partitions", "alpha"), [(1, 1.0), (8, 1.0), (12, 0.5), (100, 2.0)])
def test_zipf_weights_are_a_distribution(partitions, alpha):
    weights = zipf_weights(partitions, alpha)
    assert len(weights) == partitions
    assert math.fsum(weights) == pytest.approx(1.0)
    assert all(w > 0 for w in weights)
    assert weights == sorted(weights, reverse=True)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.7])
def test_zipf_weights_follow_the_power_law(alpha):
    weights = zipf_weights(10, alpha)
    for k in range(10):
        assert weights[0] / weights[k] == pytest.approx((k + 1) ** alpha)


def test_zipf_weights_known_values():
    harmonic_4 = 1 + 1 / 2 + 1 / 3 + 1 / 4
    assert zipf_weights(4, 1.0) == pytest.approx(
        [1 / harmonic_4, 0.5 / harmonic_4, 1 / 3 / harmonic_4, 0.25 / harmonic_4]
    )


def test_zipf_weights_small_alpha_is_nearly_uniform():
    assert zipf_weights(5, 1e-9) == pytest.approx([0.2] * 5)


# distributor


def test_no_key_lets_the_client_choose():
    choose = distributor("NO_KEY", partitions=6, producer_index=3)
    assert set(draw(choose, 100)) == {(None, -1)}


def test_key_round_robin_cycles_through_keys_in_order():
    choose = distributor("KEY_ROUND_ROBIN", partitions=6, producer_index=0, key_count=4)
    keys = [key for key, _ in draw(choose, 10)]
    assert keys == [b"key-0", b"key-1", b"key-2", b"key-3"] * 2 + [b"key-0", b"key-1"]
    assert {partition for _, partition in draw(choose, 10)} == {-1}


def test_key_round_robin_spreads_evenly():
    choose = distributor("KEY_ROUND_ROBIN", partitions=3, producer_index=5, key_count=1000)
    counts = Counter(key for key, _ in draw(choose, 5000))
    assert len(counts) == 1000
    assert set(counts.values()) == {5}


def test_key_round_robin_single_key():
    choose = distributor("KEY_ROUND_ROBIN", partitions=3, producer_index=0, key_count=1)
    assert set(draw(choose, 5)) == {(b"key-0", -1)}


def test_key_round_robin_producers_are_independent():
    first = distributor("KEY_ROUND_ROBIN", partitions=3, producer_index=0, key_count=3)
    second = distributor("KEY_ROUND_ROBIN", partitions=3, producer_index=1, key_count=3)
    first()
    assert second() == (b"key-0", -1)  # its own cycle, not advanced by the other producer
    assert first() == (b"key-1", -1)


@pytest.mark.parametrize(
    ("producer_index", "partitions", "expected"),
    [(0, 4, 0), (3, 4, 3), (4, 4, 0), (9, 4, 1), (7, 1, 0), (2, 10, 2)],
)
def test_pinned_partitions_pin_each_producer(producer_index, partitions, expected):
    choose = distributor("PINNED_PARTITIONS", partitions, producer_index)
    assert set(draw(choose, 50)) == {(None, expected)}


def test_pinned_partitions_cover_every_partition_with_enough_producers():
    pinned = {distributor("PINNED_PARTITIONS", 5, i)()[1] for i in range(5)}
    assert pinned == set(range(5))


@pytest.mark.parametrize(("partitions", "alpha"), [(8, 1.0), (16, 0.6), (5, 2.5)])
def test_partition_zipf_shares_match_the_weights(partitions, alpha):
    """Each partition's share of 200k draws lies within 5 binomial standard deviations of its weight."""
    draws = 200_000
    choose = distributor("PARTITION_ZIPF", partitions, 0, zipf_alpha=alpha, rng=random.Random(1234))
    choices = draw(choose, draws)
    assert {key for key, _ in choices} == {None}
    counts = Counter(partition for _, partition in choices)
    assert set(counts) <= set(range(partitions))
    for partition, weight in enumerate(zipf_weights(partitions, alpha)):
        std = math.sqrt(draws * weight * (1 - weight))
        assert abs(counts[partition] - draws * weight) <= 5 * std, (partition, counts[partition], draws * weight)


def test_partition_zipf_single_partition():
    choose = distributor("PARTITION_ZIPF", 1, 0, rng=random.Random(0))
    assert set(draw(choose, 100)) == {(None, 0)}


class Fixed(random.Random):
    """A 'random' source returning given values, to probe the edges of the cumulative weights."""

    def __init__(self, values):
        super().__init__(0)
        self.values = iter(values)

    def random(self):
        return next(self.values)


def test_partition_zipf_maps_the_unit_interval_onto_cumulative_weights():
    weights = zipf_weights(4, 1.0)
    w0, w01 = weights[0], weights[0] + weights[1]
    probes = [0.0, w0 / 2, w0 + 1e-9, w01 + 1e-9, 1 - 1e-12, math.nextafter(1.0, 0)]
    choose = distributor("PARTITION_ZIPF", 4, 0, rng=Fixed(probes))
    assert [choose()[1] for _ in probes] == [0, 0, 1, 2, 3, 3]


def test_partition_zipf_is_reproducible_with_a_seeded_rng():
    a = distributor("PARTITION_ZIPF", 10, 0, rng=random.Random(99))
    b = distributor("PARTITION_ZIPF", 10, 0, rng=random.Random(99))
    assert draw(a, 1000) == draw(b, 1000)


def test_unknown_distributor_is_refused():
    with pytest.raises(ValueError, match="unknown messageDistributor ROUND_ROBIN"):
        distributor("ROUND_ROBIN", 4, 0)
