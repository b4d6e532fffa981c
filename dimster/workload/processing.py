"""Simulated consumer processing: how long a poll's records keep a consumer busy."""

import heapq
import random


def processing_times_ms(count: int, low: float, high: float, rng: random.Random) -> list[float]:
    """Per-record processing time, uniform in [low, high] milliseconds."""
    if high <= 0:
        return [0.0] * count
    if low == high:
        return [low] * count
    return [rng.uniform(low, high) for _ in range(count)]


def makespan_ms(times: list[float], parallelism: int) -> float:
    """Time to process `times` with `parallelism` lanes, each record taking the next free lane in
    order (1 = serial, -1 = every record of the batch at once)."""
    if not times:
        return 0.0
    if parallelism == 1:
        return sum(times)
    if parallelism < 0 or parallelism >= len(times):
        return max(times)
    lanes = [0.0] * parallelism
    for duration in times:
        heapq.heapreplace(lanes, lanes[0] + duration)
    return max(lanes)
