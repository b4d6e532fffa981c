"""Mergeable latency histograms with a relative error of at most 1%.

Values (microseconds) fall into logarithmic buckets: bucket i holds (GAMMA**(i-1), GAMMA**i], and is
represented by the point whose relative distance to both edges is ALPHA. Memory and serialized size
depend on the spread of values (about 1,000 buckets from 1 us to 1,000 s), never on how many there
are. Values are gathered in a small buffer and counted with numpy, so recording is cheap in hot loops.
"""

import math
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction

import numpy as np

ALPHA = 0.01
GAMMA = (1 + ALPHA) / (1 - ALPHA)
LOG_GAMMA = math.log(GAMMA)
BUFFER = 4096
FEW = 64  # fewer values are counted in Python: numpy's sort and its calls cost more on them


def bucket_of(values: np.ndarray) -> np.ndarray:
    """Bucket indexes of positive values; values below 1 go to bucket 0."""
    return np.ceil(np.log(np.maximum(values, 1.0)) / LOG_GAMMA).astype(np.int64)


def bucket_value(index: int | np.ndarray):
    """The representative value of a bucket: within ALPHA of every value it holds."""
    return 2 * GAMMA**index / (GAMMA + 1)


class Histogram:
    __slots__ = ("_buffer", "_filled", "counts", "max", "min", "total")

    def __init__(self):
        self.counts: dict[int, int] = {}
        self._buffer = np.empty(BUFFER, dtype=np.float64)
        self._filled = 0
        self.total = 0
        self.min = math.inf
        self.max = -math.inf

    def record(self, value_us: float) -> None:
        self._buffer[self._filled] = value_us
        self._filled += 1
        if self._filled == BUFFER:
            self._flush()

    def record_many(self, values_us) -> None:
        for value in values_us:
            self.record(value)

    def record_array(self, values_us: np.ndarray) -> None:
        """Record a whole array at once: the cheap way for hot loops that collect values first. A
        small array is only copied into the buffer; counting waits until the buffer is full or read."""
        n = len(values_us)
        if not n:
            return
        if self._filled + n > BUFFER:
            self._flush()
            if n > BUFFER:
                self._count(np.asarray(values_us, dtype=np.float64))
                return
        self._buffer[self._filled : self._filled + n] = values_us
        self._filled += n
        if self._filled == BUFFER:
            self._flush()

    def _flush(self) -> None:
        if not self._filled:
            return
        self._count(self._buffer[: self._filled])
        self._filled = 0

    def _count(self, values: np.ndarray) -> None:
        found: Iterable[tuple[int, int]]  # (bucket index, count)
        if len(values) < FEW:  # a client's few records of a second: the usual case with many clients
            listed = values.tolist()
            low, high = min(listed), max(listed)
            found = Counter(bucket_of(values).tolist()).items()
        else:
            low, high = float(values.min()), float(values.max())
            indexes, counts = np.unique(bucket_of(values), return_counts=True)
            found = zip(indexes.tolist(), counts.tolist(), strict=True)
        self.min, self.max = min(self.min, low), max(self.max, high)
        for index, count in found:
            self.counts[index] = self.counts.get(index, 0) + count
        self.total += len(values)

    def merge(self, other: "Histogram") -> None:
        other._flush()
        self.merge_wire((other.counts, other.total, other.min, other.max))

    def merge_wire(self, wire) -> None:
        """Add a histogram as the wire carries it (to_wire), without making one: a report merges dozens."""
        counts, total, low, high = wire
        mine = self.counts
        for index, count in counts.items():
            mine[index] = mine.get(index, 0) + count
        self.total += total
        self.min = min(self.min, low)
        self.max = max(self.max, high)

    def percentile(self, q: float) -> float | None:
        """The q-th percentile (0-100), within ALPHA of the exact value; None when empty."""
        self._flush()
        if not self.total:
            return None
        # exact: in floats 99.9 / 100 * 1000 is 999.0000000000001, which would skip to rank 1000
        rank = max(1, math.ceil(Fraction(str(q)) * self.total / 100))
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= rank:
                return min(max(bucket_value(index), self.min), self.max)
        return self.max

    def to_wire(self) -> tuple[dict[int, int], int, float, float]:
        self._flush()
        return dict(self.counts), self.total, self.min, self.max

    @classmethod
    def from_wire(cls, wire) -> "Histogram":
        histogram = cls()
        histogram.counts, histogram.total, histogram.min, histogram.max = dict(wire[0]), wire[1], wire[2], wire[3]
        return histogram
