"""A report's latency histograms as columns (protocol 16): one packed array per column for all of a
report's clients, where each client's histograms travelled as a map of its own. The coordinator
takes a report's histograms in with a few numpy calls, not a Python call per histogram and value, and
sums those it merges (the console's publish latency, the run's end-to-end) in one pass.

Histogram i is the histogram of metric[i] and partition[i] of client[i] (its index in the report's
clients): total[i] values from low[i] to high[i], in size[i] buckets, which follow the previous
histograms' buckets in `bucket` (the bucket's index, metrics/histogram.py) and `count`."""

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields

import numpy as np

from dimster.worker.wire import Float64s, Int64s

# A histogram as a client sends it: (bucket -> count, total, min, max); see metrics/histogram.py.
HistogramWire = tuple[dict[int, int], int, float, float]
BUCKETS = 1 << 16  # a bucket's index at most (metrics/histogram.py: 1e308 µs falls in bucket 35,500)
# A client's histograms of an interval, by (metric, partition); partition -1 for a client-wide one.
ClientHistograms = dict[tuple[str, int], HistogramWire]


def _none() -> np.ndarray:
    return np.empty(0, np.int64)


@dataclass(eq=False)
class HistogramColumns:
    client: Int64s = field(default_factory=_none)
    metric: list[str] = field(default_factory=list)
    partition: Int64s = field(default_factory=_none)
    total: Int64s = field(default_factory=_none)
    low: Float64s = field(default_factory=lambda: np.empty(0))
    high: Float64s = field(default_factory=lambda: np.empty(0))
    size: Int64s = field(default_factory=_none)
    bucket: Int64s = field(default_factory=_none)
    count: Int64s = field(default_factory=_none)

    @classmethod
    def gather(cls, clients: Iterable[ClientHistograms]) -> "HistogramColumns":
        """The columns of the clients' histograms, client i's under index i."""
        owners, metrics, partitions, totals, lows, highs, sizes = [], [], [], [], [], [], []
        buckets: list[int] = []
        counts: list[int] = []
        for index, histograms in enumerate(clients):
            for (metric, partition), (by_bucket, total, low, high) in histograms.items():
                owners.append(index)
                metrics.append(metric)
                partitions.append(partition)
                totals.append(total)
                lows.append(low)
                highs.append(high)
                sizes.append(len(by_bucket))
                buckets.extend(by_bucket)
                counts.extend(by_bucket.values())
        ints = np.int64
        return cls(
            np.array(owners, ints), metrics, np.array(partitions, ints), np.array(totals, ints),
            np.array(lows, np.float64), np.array(highs, np.float64), np.array(sizes, ints),
            np.array(buckets, ints), np.array(counts, ints),
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self.metric)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HistogramColumns):
            return NotImplemented
        return all(np.array_equal(getattr(self, f.name), getattr(other, f.name)) for f in fields(self))

    def check(self, clients: int) -> None:
        """A ValueError unless the columns agree with each other and with a report of `clients` clients."""
        n = len(self.metric)  # a report's few dozen sizes and clients: Python's sum, min and max, not numpy's calls
        columns = (self.client, self.partition, self.total, self.low, self.high, self.size)
        if any(len(column) != n for column in columns):
            raise ValueError("histogram columns of different lengths")
        sizes, owners = self.size.tolist(), self.client.tolist()
        if len(self.bucket) != len(self.count) or sum(sizes) != len(self.bucket) or min(sizes, default=0) < 0:
            raise ValueError("histogram buckets that do not add up to their sizes")
        if n and not (min(owners) >= 0 and max(owners) < clients):
            raise ValueError(f"histograms of a client beyond the report's {clients}")
        # min and max, not abs(): int64's least is its own abs()
        if len(self.bucket) and not -BUCKETS <= int(self.bucket.min()) <= int(self.bucket.max()) <= BUCKETS:
            raise ValueError(f"a histogram bucket beyond ±{BUCKETS}")

    @functools.cached_property
    def by_metric(self) -> dict[str, HistogramWire]:
        """Each metric's histograms merged, whichever client and partition they came from, in one
        count over every bucket of the report (a report merges the histograms of dozens of clients)."""
        index, ids = self._metric_ids
        merged = self._merged(ids, np.arange(len(ids)), len(index))
        return {metric: merged[k] for metric, k in index.items() if k in merged}

    @functools.cached_property
    def _metric_ids(self) -> tuple[dict[str, int], np.ndarray]:
        """Each metric's number (in the order they first come) and each histogram's metric's number."""
        index = {metric: k for k, metric in enumerate(dict.fromkeys(self.metric))}
        return index, np.fromiter(map(index.__getitem__, self.metric), np.int64, len(self.metric))

    def of_owners(self, metric: str, owner: np.ndarray) -> dict[int, HistogramWire]:
        """The histograms of `metric` merged per owner of their clients (`owner`: each client's, an
        index from 0): a report's workers' own, each of its lines'."""
        index, ids = self._metric_ids
        if metric not in index:
            return {}
        chosen = np.flatnonzero(ids == index[metric])
        owners = owner[self.client[chosen]]
        return self._merged(owners, chosen, int(owners.max()) + 1)

    def _merged(self, ids: np.ndarray, rows: np.ndarray, keys: int) -> dict[int, HistogramWire]:
        """The histograms `rows` merged by their `ids` (0 to keys - 1), in one count over their buckets."""
        if not len(rows):
            return {}
        ends = np.cumsum(self.size)
        starts = ends - self.size
        lengths = self.size[rows]
        if len(rows) == len(self.size):  # every histogram, in order (by_metric)
            bucket, count = self.bucket, self.count
        else:
            picked = np.repeat(starts[rows] - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
            bucket, count = self.bucket[picked], self.count[picked]
        shift = min(int(bucket.min()), 0) if len(bucket) else 0
        width = int(bucket.max()) - shift + 1 if len(bucket) else 1
        flat = np.repeat(ids, lengths) * width + (bucket - shift)
        counts = np.bincount(flat, weights=count, minlength=keys * width).reshape(keys, width)
        totals = np.bincount(ids, weights=self.total[rows], minlength=keys).astype(np.int64).tolist()
        order = np.argsort(ids, kind="stable")  # each key's rows together, for its lowest and highest value
        present, firsts = np.unique(ids[order], return_index=True)
        lows = np.minimum.reduceat(self.low[rows][order], firsts).tolist()
        highs = np.maximum.reduceat(self.high[rows][order], firsts).tolist()
        keyed, at = np.nonzero(counts)  # every key's buckets with a count, key by key, in bucket order
        buckets, found = (at + shift).tolist(), counts[keyed, at].astype(np.int64).tolist()
        bounds = np.searchsorted(keyed, present, "left").tolist(), np.searchsorted(keyed, present, "right").tolist()
        merged = {}
        for k, first, last, low, high in zip(present.tolist(), *bounds, lows, highs, strict=True):
            merged[k] = (dict(zip(buckets[first:last], found[first:last], strict=True)), totals[k], low, high)
        return merged

    def wires(self) -> Iterator[tuple[int, str, int, HistogramWire]]:
        """Each histogram as a client sent it: (client index, metric, partition, histogram)."""
        ends = np.cumsum(self.size).tolist()
        buckets, counts = self.bucket.tolist(), self.count.tolist()
        columns = (self.client.tolist(), self.metric, self.partition.tolist(), self.total.tolist())
        start = 0
        for i, (client, metric, partition, total) in enumerate(zip(*columns, strict=True)):
            by_bucket = dict(zip(buckets[start : ends[i]], counts[start : ends[i]], strict=True))
            yield client, metric, partition, (by_bucket, total, float(self.low[i]), float(self.high[i]))
            start = ends[i]
