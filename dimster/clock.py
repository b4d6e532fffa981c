"""Deadlines on the monotonic clock. A wait measured on the wall clock ends early, or never, when the
clock is stepped (NTP, a person, a VM resumed); the monotonic clock only goes forward. The wall clock
stays where a time is shared (records' timestamps, the load's start across hosts, clock probes)."""

import time


class Deadline:
    """`seconds` from now, on the monotonic clock."""

    __slots__ = ("at",)

    def __init__(self, seconds: float):
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds to go (0 once passed)."""
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.at
