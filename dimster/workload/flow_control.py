"""Which of its partitions a consumer-group member pauses before a poll (`flowControl`), as a stream
processor under back-pressure does: KAFKA-7548's experiment pauses a random 9 of 10 before every poll."""

import random

from dimster.workload.model import FlowControl


def partitions_to_pause(assigned: list[int], flow: FlowControl, poll: int, rng: random.Random) -> set[int]:
    """`pausedFraction` of the assigned partitions (rounded half up, and at most all but one of them):
    a new random choice each poll, or with `rotate` the window that starts at partition `poll`."""
    count = min(int(flow.paused_fraction * len(assigned) + 0.5), len(assigned) - 1)
    if count <= 0:
        return set()
    if flow.pattern == "rotate":
        start = poll % len(assigned)
        return {assigned[(start + i) % len(assigned)] for i in range(count)}
    return set(rng.sample(assigned, count))
