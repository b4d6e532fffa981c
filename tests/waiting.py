"""Waiting in a test for something that must happen: a bound on liveness, never a speed."""

import time
from collections.abc import Callable


def until(predicate: Callable[[], object], timeout: float = 120.0, every: float = 0.05) -> bool:
    """Whether `predicate` holds within `timeout` s, looked at every `every` s. The unit tier runs niced
    beside the kafka tier (scripts/test.sh): on a busy host a thread of it may wait many seconds for a
    CPU (10 s was too short once: a fault runner's two steps, milliseconds of work)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True
