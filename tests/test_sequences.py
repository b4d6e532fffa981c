"""Arrived sequence numbers as ranges: runs of a batch, merging, duplicates and missing counts,
checked by hand and against a plain Python set on shuffled random input."""

import random

import pytest

from dimster.metrics.sequences import FEW, RangeSet, to_ranges

pytestmark = pytest.mark.unit


def range_set(*pairs: tuple[int, int]) -> RangeSet:
    rs = RangeSet()
    for first, last in pairs:
        rs.add(first, last)
    return rs


# to_ranges


@pytest.mark.parametrize(
    ("sequences", "expected"),
    [
        ([], []),
        ([5], [(5, 5)]),
        ([0, 1, 2, 3], [(0, 3)]),
        ([3, 1, 2, 0], [(0, 3)]),
        ([1, 2, 4, 5, 9], [(1, 2), (4, 5), (9, 9)]),
        ([7, 7], [(7, 7), (7, 7)]),
        ([1, 2, 2, 3], [(1, 2), (2, 3)]),
        ([10**12, 10**12 + 1], [(10**12, 10**12 + 1)]),
    ],
)
def test_to_ranges(sequences, expected):
    assert to_ranges(sequences) == expected


def test_to_ranges_gives_plain_ints():
    (first, last), *_ = to_ranges([3, 4])
    assert type(first) is int and type(last) is int


def test_to_ranges_covers_every_value_once_per_occurrence():
    rng = random.Random(5)
    values = [rng.randrange(200) for _ in range(500)]
    expanded = sorted(v for first, last in to_ranges(values) for v in range(first, last + 1))
    assert expanded == sorted(values)


def test_to_ranges_of_an_array_are_those_of_its_list():
    import numpy as np

    rng = random.Random(6)
    for size in (0, 3, FEW + 5, 500):
        values = [rng.randrange(300) for _ in range(size)]
        assert to_ranges(np.array(values, dtype=np.int64)) == to_ranges(values)


@pytest.mark.parametrize("seed", range(20))
def test_few_sequence_numbers_give_the_same_runs_as_many(seed):
    """Below FEW values to_ranges sorts in Python; the runs are those of the numpy path."""
    rng = random.Random(seed)
    values = [rng.randrange(3 * FEW) for _ in range(FEW - 1)]
    padding = list(range(10**9, 10**9 + FEW))  # one run of its own, far above: the numpy path
    assert [*to_ranges(values), (10**9, 10**9 + FEW - 1)] == to_ranges(values + padding)


# RangeSet


def test_empty_range_set():
    rs = RangeSet()
    assert rs.count() == 0
    assert rs.missing_below(10) == 10
    assert rs.missing_below(0) == 0


def test_disjoint_ranges_stay_apart_and_sorted():
    rs = range_set((10, 12), (0, 2), (20, 20), (5, 6))
    assert rs.ranges() == [(0, 2), (5, 6), (10, 12), (20, 20)]
    assert rs.count() == 3 + 2 + 3 + 1


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([(0, 4), (5, 9)], [(0, 9)]),  # adjacent on the right
        ([(5, 9), (0, 4)], [(0, 9)]),  # adjacent on the left
        ([(0, 2), (6, 8), (3, 5)], [(0, 8)]),  # fills the gap between two
        ([(0, 0), (2, 2), (4, 4), (1, 3)], [(0, 4)]),  # swallows several
        ([(0, 2), (4, 6), (3, 3)], [(0, 6)]),
        ([(10, 20), (0, 8)], [(0, 8), (10, 20)]),  # one short of touching
    ],
)
def test_adjacent_and_overlapping_ranges_merge(pairs, expected):
    assert range_set(*pairs).ranges() == expected


def test_add_reports_duplicates():
    rs = RangeSet()
    assert rs.add(0, 9) == 0
    assert rs.add(5, 14) == 5
    assert rs.add(0, 14) == 15
    assert rs.add(20, 29) == 0
    assert rs.add(12, 22) == 3 + 3  # 12..14 and 20..22 were there; 15..19 are new
    assert rs.ranges() == [(0, 29)]
    assert rs.count() == 30


def test_single_value_duplicates():
    rs = RangeSet()
    assert rs.add(7, 7) == 0
    assert rs.add(7, 7) == 1
    assert rs.add(6, 8) == 1
    assert rs.ranges() == [(6, 8)]


def test_duplicates_within_one_batch_are_counted():
    rs = RangeSet()
    duplicates = sum(rs.add(first, last) for first, last in to_ranges([1, 2, 2, 3, 3, 3]))
    assert duplicates == 3
    assert rs.ranges() == [(1, 3)]


def test_missing_below():
    rs = range_set((0, 4), (10, 14), (20, 29))
    assert rs.missing_below(5) == 0
    assert rs.missing_below(10) == 5
    assert rs.missing_below(12) == 5
    assert rs.missing_below(20) == 10
    assert rs.missing_below(25) == 10
    assert rs.missing_below(40) == 20
    assert rs.missing_below(1) == 0


def test_missing_below_when_the_first_values_are_lost():
    rs = range_set((3, 5))
    assert rs.missing_below(3) == 3
    assert rs.missing_below(6) == 3
    assert rs.missing_below(4) == 3


class Reference:
    """The same bookkeeping with a Python set."""

    def __init__(self):
        self.seen: set[int] = set()

    def add_batch(self, batch: list[int]) -> int:
        duplicates = 0
        for value in batch:
            duplicates += value in self.seen
            self.seen.add(value)
        return duplicates


@pytest.mark.parametrize("seed", range(20))
def test_shuffled_batches_match_a_python_set(seed):
    """Values 0..n-1 with some lost and some sent twice, shuffled and cut into batches as consumers
    would see them: duplicates, counts, missing values and the ranges all agree with a set."""
    rng = random.Random(seed)
    n = rng.randint(1, 3000)
    arrivals = [v for v in range(n) if rng.random() > 0.1]  # ~10% lost
    arrivals += rng.choices(arrivals, k=len(arrivals) // 5) if arrivals else []  # ~20% redelivered
    rng.shuffle(arrivals)

    rs, reference = RangeSet(), Reference()
    position = 0
    while position < len(arrivals):
        size = rng.randint(1, 200)
        batch = arrivals[position : position + size]
        position += size
        assert sum(rs.add(first, last) for first, last in to_ranges(batch)) == reference.add_batch(batch)

    seen = reference.seen
    assert rs.count() == len(seen)
    for limit in (0, 1, n // 2, n, n + 10):
        assert rs.missing_below(limit) == sum(1 for v in range(limit) if v not in seen)
    # the ranges are exactly the maximal runs of the set: disjoint, sorted, never touching
    assert rs.ranges() == to_ranges(sorted(seen))
    held = rs.ranges()
    assert all(held[i][1] + 1 < held[i + 1][0] for i in range(len(held) - 1))


def test_ranges_follow_gaps_not_message_count():
    rs = RangeSet()
    for first in range(0, 1_000_000, 1000):
        rs.add(first, first + 999)
    assert rs.ranges() == [(0, 999_999)]
    rs.add(2_000_000, 2_000_000)
    assert len(rs) == 2
    assert rs.missing_below(2_000_001) == 1_000_000


def test_overlap_and_repeated_values_agree_with_plain_sets_on_random_input():
    """A producer's failed sends are kept as ranges (a broker outage fails thousands in runs): how
    many of them a group settled anyway is the two sets' overlap."""
    rng = random.Random(48)
    for _ in range(200):
        values = [rng.randrange(300) for _ in range(rng.randrange(0, 120))]
        failed = RangeSet()
        failed.add_values(values)
        step = rng.randrange(5, 40)
        settled_values = {v for first in range(0, 300, step) for v in range(first, first + rng.randrange(1, 20))}
        settled = RangeSet()
        for first, last in to_ranges(sorted(settled_values)):
            settled.add(first, last)
        assert failed.count() == len(set(values))
        assert failed.overlap(settled) == settled.overlap(failed) == len(set(values) & settled_values)


@pytest.mark.parametrize(
    ("covered", "expected"),
    [
        ([], [(10, 20)]),
        ([(0, 9), (21, 30)], [(10, 20)]),
        ([(0, 10), (20, 30)], [(11, 19)]),
        ([(12, 13), (12, 15), (18, 18)], [(10, 11), (16, 17), (19, 20)]),
        ([(5, 25)], []),
        ([(20, 20), (10, 10)], [(11, 19)]),
    ],
)
def test_the_gaps_of_a_range_are_what_no_covered_range_holds(covered, expected):
    from dimster.metrics.sequences import gaps

    assert gaps(10, 20, covered) == expected


def test_many_ranges_added_at_once_make_the_set_and_the_duplicates_one_by_one_would():
    """add_many merges in one pass from FEW ranges on: the same ranges and duplicate count as adding
    each, on random scattered input with repeats and overlaps."""
    rng = random.Random(48)
    for _ in range(200):
        one_by_one, at_once = RangeSet(), RangeSet()
        for _ in range(3):
            ranges = [(s, s + rng.randrange(0, 4)) for s in rng.sample(range(2_000), rng.randrange(0, 200))]
            duplicates = sum(one_by_one.add(first, last) for first, last in ranges)
            assert at_once.add_many(ranges) == duplicates
            assert at_once.ranges() == one_by_one.ranges()


def test_within_many_finds_what_within_finds_range_by_range():
    """within_many (numpy from FEW ranges on) gives the pieces within() gives for each range, on
    random scattered input in any order, with overlaps, repeats and ranges that hold nothing."""
    rng = random.Random(51)
    for _ in range(200):
        held = RangeSet()
        held.add_many([(s, s + rng.randrange(0, 5)) for s in rng.sample(range(3_000), rng.randrange(0, 300))])
        wanted = [(s, s + rng.randrange(0, 40)) for s in rng.choices(range(-50, 3_100), k=rng.randrange(0, 3 * FEW))]
        expected = [both for first, last in wanted for both in held.within(first, last)]
        assert held.within_many(wanted) == expected


def test_a_set_grown_at_the_top_and_cut_from_the_bottom_agrees_with_a_python_set_throughout():
    """Ranges added one by one and many at once, with repeats, holes filled later and cuts from the
    bottom, as a share group's sets are folded: after every step the set holds what a plain set of
    its values holds (its arrays moved down, grown and shrunk on the way)."""
    rng = random.Random(4848)
    for _ in range(40):
        rs, seen, floor, top = RangeSet(), set(), 0, 0
        for _ in range(60):
            top += rng.randrange(1, 300)
            batch = [
                (s, s + rng.randrange(0, 3))
                for s in rng.sample(range(floor, top), min(top - floor, rng.choice((3, 2 * FEW))))
            ]
            fresh = [v for first, last in batch for v in range(first, last + 1)]
            duplicates = len(fresh) - len(set(fresh) - seen)
            assert rs.add_many(batch) == duplicates
            seen.update(fresh)
            if rng.random() < 0.4:
                floor = rng.randrange(floor, top + 1)
                cut = rs.cut_below(floor)
                assert sorted(v for first, last in cut for v in range(first, last + 1)) == sorted(
                    v for v in seen if v < floor
                )
                seen = {v for v in seen if v >= floor}
            assert rs.ranges() == to_ranges(sorted(seen))
            assert rs.count() == len(seen) and len(rs) == len(rs.ranges())
            probe = rng.randrange(floor - 5, top + 5)
            assert (probe in rs) == (probe in seen)
            assert rs.within(probe, probe + 20) == to_ranges(sorted(v for v in seen if probe <= v <= probe + 20))


@pytest.mark.parametrize(("per_second", "kept", "at_once"), [(100, 3100, True), (19, 1, False), (24, 2, False)])
def test_a_set_at_a_steady_size_keeps_its_arrays(per_second, kept, at_once):
    """A set that takes a second's ranges at the top (at once, or one by one) and is then cut to its
    newest `kept`, at a steady size, stops asking for memory: its arrays are the same objects from
    the second minute on (arrays resized at each change left glibc's heap in pieces: the
    coordinator's RSS rose for an hour; a set cut nearly empty must not be shrunk and grown again)."""
    rs, arrays = RangeSet(), []  # each array the set held in the second minute, in turn
    for second in range(120):
        batch = [(10 * v, 10 * v + 4) for v in range(second * per_second, (second + 1) * per_second)]
        if at_once:
            rs.add_many(batch)
        else:
            for first, last in batch:
                rs.add(first, last)
        held = rs.ranges()
        rs.cut_below(held[-kept][0] if len(held) >= kept else 0)
        assert len(rs) == min(kept, (second + 1) * per_second)
        if second >= 60 and (not arrays or arrays[-1] is not rs._starts):
            arrays.append(rs._starts)
    assert len(arrays) == 1, f"the arrays were replaced {len(arrays) - 1} times at a steady size"
