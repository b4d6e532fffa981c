"""messageDistributor: which key and partition each message of a producer gets."""

import bisect
import itertools
import random
from collections.abc import Callable

# (key, partition); partition -1 lets the client's partitioner choose.
Choice = tuple[bytes | None, int]


def zipf_weights(partitions: int, alpha: float) -> list[float]:
    """Share of traffic of each partition under Zipf(alpha): partition k gets 1/(k+1)^alpha, normalized."""
    raw = [1.0 / (k + 1) ** alpha for k in range(partitions)]
    total = sum(raw)
    return [w / total for w in raw]


def distributor(
    kind: str,
    partitions: int,
    producer_index: int,
    *,
    zipf_alpha: float = 1.0,
    key_count: int = 1000,
    rng: random.Random | None = None,
) -> Callable[[], Choice]:
    rng = rng or random.Random()
    if kind == "NO_KEY":
        return lambda: (None, -1)
    if kind == "KEY_ROUND_ROBIN":
        keys = itertools.cycle([f"key-{i}".encode() for i in range(key_count)])
        return lambda: (next(keys), -1)
    if kind == "KEY_RANDOM":  # OpenMessaging Benchmark's RANDOM_NANO: any of the keys, each record
        choices = [f"key-{i}".encode() for i in range(key_count)]
        return lambda: (rng.choice(choices), -1)
    if kind == "PINNED_PARTITIONS":
        pinned = producer_index % partitions
        return lambda: (None, pinned)
    if kind == "PARTITION_ZIPF":
        cumulative = list(itertools.accumulate(zipf_weights(partitions, zipf_alpha)))
        cumulative[-1] = 1.0
        return lambda: (None, bisect.bisect_left(cumulative, rng.random()))
    raise ValueError(f"unknown messageDistributor {kind}")
