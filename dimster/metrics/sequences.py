"""Which sequence numbers of each producer arrived: sets of closed ranges, merged as they come, so
lost and duplicated records can be counted with memory that follows gaps, not message counts."""

import bisect
import itertools
from array import array

import numpy as np

FEW = 64  # fewer sequence numbers are sorted in Python: numpy's calls cost more on them


def to_ranges(sequences: "list[int] | np.ndarray") -> list[tuple[int, int]]:
    """Sorted runs [(first, last), ...] of sequence numbers, a list or an array (repeats kept as
    separate runs)."""
    if not len(sequences):
        return []
    if len(sequences) < FEW:
        ordered = sorted(map(int, sequences))
        runs, first = [], ordered[0]
        for previous, value in itertools.pairwise(ordered):
            if value != previous + 1:
                runs.append((first, previous))
                first = value
        runs.append((first, ordered[-1]))
        return runs
    values = np.sort(np.asarray(sequences, dtype=np.int64))
    breaks = np.nonzero(np.diff(values) != 1)[0]
    starts = np.concatenate(([0], breaks + 1))
    ends = np.concatenate((breaks, [len(values) - 1]))
    return list(zip(values[starts].tolist(), values[ends].tolist(), strict=True))


def gaps(first: int, last: int, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The pieces of [first, last] that none of the `covered` ranges holds."""
    pieces, start = [], first
    for low, high in sorted(covered):
        if low > start:
            pieces.append((start, min(low - 1, last)))
        start = max(start, high + 1)
        if start > last:
            return pieces
    return [*pieces, (start, last)] if start <= last else pieces


def pairs(ranges: list[tuple[int, int]]) -> np.ndarray:
    """Ranges as an array of (first, last) rows: read as one flat run of numbers, some three times
    faster than numpy's reading of a list of tuples."""
    return np.fromiter(itertools.chain.from_iterable(ranges), np.int64, 2 * len(ranges)).reshape(-1, 2)


def ranges_size(ranges: list[tuple[int, int]]) -> int:
    """How many values (first, last) ranges hold."""
    if len(ranges) == 1:  # the usual case: one consumer's records of a producer in an interval
        return ranges[0][1] - ranges[0][0] + 1
    return sum(last - first + 1 for first, last in ranges)


class RangeSet:
    """Disjoint closed ranges of integers; `add` reports how many added values were already there.
    Held as packed 64-bit integers (16 bytes a range; Python lists of ints take some 80)."""

    def __init__(self):
        self.starts = array("q")
        self.ends = array("q")

    def add(self, first: int, last: int) -> int:
        """Insert [first, last]; returns how many of its values were present before (duplicates)."""
        ends = self.ends
        if not ends or first > ends[-1] + 1:  # after every range: the usual case of sequences that grow
            self.starts.append(first)
            ends.append(last)
            return 0
        if first == ends[-1] + 1:  # just after the last range: it grows
            ends[-1] = max(ends[-1], last)
            return 0
        i = bisect.bisect_left(self.ends, first - 1)  # first range that could touch or overlap
        j = i
        duplicates = 0
        new_first, new_last = first, last
        while j < len(self.starts) and self.starts[j] <= last + 1:
            overlap = min(last, self.ends[j]) - max(first, self.starts[j]) + 1
            duplicates += max(0, overlap)
            new_first = min(new_first, self.starts[j])
            new_last = max(new_last, self.ends[j])
            j += 1
        if j == i + 1:  # one range grew: in place
            self.starts[i], self.ends[i] = new_first, new_last
        else:  # between two ranges, or joining several
            self.starts[i:j] = array("q", (new_first,))
            self.ends[i:j] = array("q", (new_last,))
        return duplicates

    def add_many(self, ranges: list[tuple[int, int]]) -> int:
        """Insert each of `ranges`; returns how many of their values were present before or came twice
        (duplicates). Many at once are merged in one pass with the ranges they can touch (those from
        the first that ends at or after the lowest added value less one), not inserted one by one
        (each insert into the middle of the arrays moves their tails)."""
        if len(ranges) == 1:  # the usual case: one consumer's records of a producer in an interval
            return self.add(*ranges[0])
        if len(ranges) < FEW:
            return sum(self.add(first, last) for first, last in ranges)
        added = pairs(ranges)
        i = bisect.bisect_left(self.ends, int(added[:, 0].min()) - 1)  # those before i stay as they are
        starts = np.concatenate((np.frombuffer(self.starts[i:], dtype=np.int64), added[:, 0]))
        ends = np.concatenate((np.frombuffer(self.ends[i:], dtype=np.int64), added[:, 1]))
        before = int((ends - starts + 1).sum())  # the touched ranges' values, and every added one
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], np.maximum.accumulate(ends[order])
        begins = np.concatenate(([0], np.flatnonzero(starts[1:] > ends[:-1] + 1) + 1))
        finishes = np.concatenate((begins[1:] - 1, [len(starts) - 1]))
        del self.starts[i:], self.ends[i:]
        self.starts.frombytes(starts[begins].tobytes())
        self.ends.frombytes(ends[finishes].tobytes())
        return before - int((ends[finishes] - starts[begins] + 1).sum())

    def __contains__(self, value: int) -> bool:
        i = bisect.bisect_right(self.starts, value) - 1
        return i >= 0 and self.ends[i] >= value

    def ranges(self) -> list[tuple[int, int]]:
        return list(zip(self.starts, self.ends, strict=True))

    def count(self) -> int:
        return sum(e - s + 1 for s, e in zip(self.starts, self.ends, strict=True))

    def within(self, first: int, last: int) -> list[tuple[int, int]]:
        """This set's values in [first, last], as ranges."""
        i = bisect.bisect_left(self.ends, first)
        found = []
        while i < len(self.starts) and self.starts[i] <= last:
            found.append((max(first, self.starts[i]), min(last, self.ends[i])))
            i += 1
        return found

    def within_many(self, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """This set's values in each of `ranges` (in any order, overlapping or not), as ranges: within()
        of each, in one pass of numpy from FEW ranges on (a simulated minute at a million records a
        second brings some 3 million scattered rejects)."""
        if len(ranges) < FEW or not self.starts:
            return [both for first, last in ranges for both in self.within(first, last)]
        wanted = pairs(ranges)
        starts, ends = np.frombuffer(self.starts, dtype=np.int64), np.frombuffer(self.ends, dtype=np.int64)
        low = np.searchsorted(ends, wanted[:, 0], "left")  # the first of ours that ends at or after it starts
        counts = np.maximum(np.searchsorted(starts, wanted[:, 1], "right") - low, 0)  # ours it touches
        which = np.repeat(np.arange(len(wanted)), counts)  # a row a piece: the wanted range's ...
        ours = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts - low, counts)  # ... and ours
        firsts = np.maximum(wanted[which, 0], starts[ours])
        lasts = np.minimum(wanted[which, 1], ends[ours])
        return list(zip(firsts.tolist(), lasts.tolist(), strict=True))

    def values(self):
        """Every value, in order."""
        for first, last in zip(self.starts, self.ends, strict=True):
            yield from range(first, last + 1)

    def add_values(self, values: list[int]) -> None:
        """Insert each of `values` (repeats are one)."""
        for first, last in to_ranges(values):
            self.add(first, last)

    def overlap(self, other: "RangeSet") -> int:
        """How many values both sets hold: one pass over both, in order."""
        i = j = found = 0
        while i < len(self.starts) and j < len(other.starts):
            found += max(0, min(self.ends[i], other.ends[j]) - max(self.starts[i], other.starts[j]) + 1)
            if self.ends[i] < other.ends[j]:
                i += 1
            else:
                j += 1
        return found

    def cut_below(self, limit: int) -> list[tuple[int, int]]:
        """Remove and return the values below `limit`, as ranges."""
        i = bisect.bisect_left(self.ends, limit)  # ranges before i end below limit
        cut = list(zip(self.starts[:i], self.ends[:i], strict=True))
        if i < len(self.starts) and self.starts[i] < limit:  # one range straddles it
            cut.append((self.starts[i], limit - 1))
            self.starts[i] = limit
        del self.starts[:i], self.ends[:i]
        return cut

    def end_of(self, value: int) -> int | None:
        """The last value of the range that holds `value`, None if none does."""
        i = bisect.bisect_right(self.starts, value) - 1
        return self.ends[i] if i >= 0 and self.ends[i] >= value else None

    def missing_below(self, limit: int) -> int:
        """How many of 0..limit-1 are absent."""
        ranges = zip(self.starts, self.ends, strict=True)
        present = sum(max(0, min(e, limit - 1) - s + 1) for s, e in ranges if s < limit)
        return max(0, limit - present)


def first_absent(start: int, sets: list[RangeSet]) -> int:
    """The first value from `start` on that none of `sets` holds."""
    value, moved = start, True
    while moved:
        moved = False
        for ranges in sets:
            end = ranges.end_of(value)
            if end is not None:
                value, moved = end + 1, True
    return value
