"""Which sequence numbers of each producer arrived: sets of closed ranges, merged as they come, so
lost and duplicated records can be counted with memory that follows gaps, not message counts."""

import bisect
import itertools
from array import array

import numpy as np

FEW = 64  # fewer sequence numbers are sorted in Python: numpy's calls cost more on them
MIN_CAPACITY = 4  # ranges a set's arrays hold at the least


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
    Held as packed 64-bit integers (16 bytes a range; Python lists of ints take some 80) in arrays
    with room to spare: the ranges held are those at [_lo, _hi). A run's sets grow at the top and are
    cut from the bottom as they fold. Arrays resized at each change asked the allocator for memory
    every few seconds, and glibc's heap kept the pieces they left (the coordinator's RSS rose for an
    hour); these are replaced only when full or held to an eighth, by arrays a quarter larger than held."""

    def __init__(self) -> None:
        self._starts = array("q")
        self._ends = array("q")
        self._lo = self._hi = 0
        self._peak = 0  # the most ranges held before a cut since the arrays last changed: their size

    def __len__(self) -> int:
        """How many ranges are held."""
        return self._hi - self._lo

    def nbytes(self) -> int:
        """Bytes of its arrays: the ranges held and the room beside them."""
        return 16 * len(self._starts)

    def _room(self, extra: int) -> None:
        """Room for `extra` more ranges after the last: the held ones moved down to the arrays' start
        when that leaves a tenth free, else new arrays a quarter larger than needed (or than the most
        held before a cut, so a set cut nearly empty at each fold is not shrunk and grown each time)."""
        held, capacity = self._hi - self._lo, len(self._starts)
        needed = held + extra
        wanted = max(needed, self._peak)
        if 10 * needed <= 9 * capacity and (8 * wanted > capacity or capacity <= MIN_CAPACITY):
            for column in (self._starts, self._ends):
                with memoryview(column) as view:
                    view[:held] = view[self._lo : self._hi]  # a memmove, no copy made on the way
        else:
            capacity = max(MIN_CAPACITY, wanted + wanted // 4)
            self._starts, self._ends = (self._grown(column, capacity) for column in (self._starts, self._ends))
        self._lo, self._hi, self._peak = 0, held, needed

    def _grown(self, column: array, capacity: int) -> array:
        new = array("q", (0,)) * capacity
        with memoryview(new) as to, memoryview(column) as held:
            to[: self._hi - self._lo] = held[self._lo : self._hi]
        return new

    def _replace(self, i: int, j: int, firsts: array, lasts: array) -> None:
        """Put the ranges (`firsts`, `lasts`) where the held ones at [i, j) are; those after move."""
        shift = len(firsts) - (j - i)
        if self._hi + shift > len(self._starts):
            i, j = i - self._lo, j - self._lo
            self._room(shift)
            i, j = i + self._lo, j + self._lo
        hi = self._hi
        for column, values in ((self._starts, firsts), (self._ends, lasts)):
            with memoryview(column) as view:
                if shift and j < hi:
                    view[j + shift : hi + shift] = view[j:hi]  # a memmove within the array
                view[i : i + len(values)] = values
        self._hi = hi + shift

    def add(self, first: int, last: int) -> int:
        """Insert [first, last]; returns how many of its values were present before (duplicates)."""
        starts, ends, hi = self._starts, self._ends, self._hi
        if hi == self._lo or first > ends[hi - 1] + 1:  # after every range: the usual case of growing sequences
            if hi == len(ends):
                self._room(1)
                starts, ends, hi = self._starts, self._ends, self._hi
            starts[hi], ends[hi] = first, last
            self._hi = hi + 1
            return 0
        if first == ends[hi - 1] + 1:  # just after the last range: it grows
            ends[hi - 1] = max(ends[hi - 1], last)
            return 0
        i = bisect.bisect_left(ends, first - 1, self._lo, hi)  # first range that could touch or overlap
        j = i
        duplicates = 0
        new_first, new_last = first, last
        while j < hi and starts[j] <= last + 1:
            overlap = min(last, ends[j]) - max(first, starts[j]) + 1
            duplicates += max(0, overlap)
            new_first = min(new_first, starts[j])
            new_last = max(new_last, ends[j])
            j += 1
        if j == i + 1:  # one range grew: in place
            starts[i], ends[i] = new_first, new_last
        else:  # between two ranges, or joining several
            self._replace(i, j, array("q", (new_first,)), array("q", (new_last,)))
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
        hi = self._hi
        i = bisect.bisect_left(self._ends, int(added[:, 0].min()) - 1, self._lo, hi)  # those before i stay
        starts = np.concatenate((np.frombuffer(self._starts, dtype=np.int64)[i:hi], added[:, 0]))
        ends = np.concatenate((np.frombuffer(self._ends, dtype=np.int64)[i:hi], added[:, 1]))
        before = int((ends - starts + 1).sum())  # the touched ranges' values, and every added one
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], np.maximum.accumulate(ends[order])
        begins = np.concatenate(([0], np.flatnonzero(starts[1:] > ends[:-1] + 1) + 1))
        finishes = np.concatenate((begins[1:] - 1, [len(starts) - 1]))
        firsts, lasts = starts[begins], ends[finishes]
        self._replace(i, hi, array("q", firsts.tobytes()), array("q", lasts.tobytes()))
        return before - int((lasts - firsts + 1).sum())

    def __contains__(self, value: int) -> bool:
        i = bisect.bisect_right(self._starts, value, self._lo, self._hi) - 1
        return i >= self._lo and self._ends[i] >= value

    def _held(self) -> zip:
        """The held ranges' (first, last) pairs, read in place (the arrays are never resized)."""
        lo, hi = self._lo, self._hi
        return zip(memoryview(self._starts)[lo:hi], memoryview(self._ends)[lo:hi], strict=True)

    def ranges(self) -> list[tuple[int, int]]:
        return list(self._held())

    def count(self) -> int:
        return sum(e - s + 1 for s, e in self._held())

    def within(self, first: int, last: int) -> list[tuple[int, int]]:
        """This set's values in [first, last], as ranges."""
        starts, ends, hi = self._starts, self._ends, self._hi
        i = bisect.bisect_left(ends, first, self._lo, hi)
        found = []
        while i < hi and starts[i] <= last:
            found.append((max(first, starts[i]), min(last, ends[i])))
            i += 1
        return found

    def within_many(self, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """This set's values in each of `ranges` (in any order, overlapping or not), as ranges: within()
        of each, in one pass of numpy from FEW ranges on (a simulated minute at a million records a
        second brings some 3 million scattered rejects)."""
        if len(ranges) < FEW or not len(self):
            return [both for first, last in ranges for both in self.within(first, last)]
        wanted = pairs(ranges)
        starts = np.frombuffer(self._starts, dtype=np.int64)[self._lo : self._hi]
        ends = np.frombuffer(self._ends, dtype=np.int64)[self._lo : self._hi]
        low = np.searchsorted(ends, wanted[:, 0], "left")  # the first of ours that ends at or after it starts
        counts = np.maximum(np.searchsorted(starts, wanted[:, 1], "right") - low, 0)  # ours it touches
        which = np.repeat(np.arange(len(wanted)), counts)  # a row a piece: the wanted range's ...
        ours = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts - low, counts)  # ... and ours
        firsts = np.maximum(wanted[which, 0], starts[ours])
        lasts = np.minimum(wanted[which, 1], ends[ours])
        return list(zip(firsts.tolist(), lasts.tolist(), strict=True))

    def values(self):
        """Every value, in order."""
        for first, last in self._held():
            yield from range(first, last + 1)

    def add_values(self, values: list[int]) -> None:
        """Insert each of `values` (repeats are one)."""
        for first, last in to_ranges(values):
            self.add(first, last)

    def overlap(self, other: "RangeSet") -> int:
        """How many values both sets hold: one pass over both, in order."""
        i, j, found = self._lo, other._lo, 0
        while i < self._hi and j < other._hi:
            found += max(0, min(self._ends[i], other._ends[j]) - max(self._starts[i], other._starts[j]) + 1)
            if self._ends[i] < other._ends[j]:
                i += 1
            else:
                j += 1
        return found

    def cut_below(self, limit: int) -> list[tuple[int, int]]:
        """Remove and return the values below `limit`, as ranges."""
        lo, hi = self._lo, self._hi
        i = bisect.bisect_left(self._ends, limit, lo, hi)  # ranges before i end below limit
        self._peak = max(self._peak, hi - lo)
        cut = list(zip(self._starts[lo:i], self._ends[lo:i], strict=True))
        if i < hi and self._starts[i] < limit:  # one range straddles it
            cut.append((self._starts[i], limit - 1))
            self._starts[i] = limit
        self._lo, self._hi = (i, hi) if i < hi else (0, 0)
        return cut

    def end_of(self, value: int) -> int | None:
        """The last value of the range that holds `value`, None if none does."""
        i = bisect.bisect_right(self._starts, value, self._lo, self._hi) - 1
        return self._ends[i] if i >= self._lo and self._ends[i] >= value else None

    def missing_below(self, limit: int) -> int:
        """How many of 0..limit-1 are absent."""
        present = sum(max(0, min(e, limit - 1) - s + 1) for s, e in self._held() if s < limit)
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
