"""The worker's clock: this host's clock corrected by its estimated offset to the coordinator's.

A producer writes its records' intended send times and a consumer reads the time they arrive; on two
hosts those come from two clocks. Every time a worker reports or writes into a record is on the
coordinator's clock, so an end-to-end latency across hosts leaves their clock offset out. Durations
measured on one host (publish latency) need no correction.
"""

import time

_offset = 0.0  # seconds this host's clock is ahead of the coordinator's


def set_offset(seconds: float) -> None:
    global _offset
    _offset = seconds


def offset() -> float:
    return _offset


def now() -> float:
    """Epoch seconds on the coordinator's clock."""
    return time.time() - _offset


def now_ns() -> int:
    return time.time_ns() - int(_offset * 1e9)
