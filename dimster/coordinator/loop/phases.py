"""The run's phases over time (starting, warmup, measure, drain, closing, done), kept as the moments
each began, so a reading that reaches the run loop after the phase it was taken in still goes under
that phase: a broker scrape that took a second to answer, a lag sample read as the run stopped.
Measure's start is known at load start and entered then, ahead of time (moved by a live warmupSeconds).
The current phase only moves forward, even if the wall clock steps back."""

import bisect
import time


class RunPhases:
    def __init__(self) -> None:
        self._starts: list[float] = [float("-inf")]
        self._names: list[str] = ["starting"]
        self._reached = 0  # the index of the latest phase begun: never goes back
        self._measure_told = False

    def start_load(self, at: float, warmup_seconds: float, load_started: float) -> None:
        """Load from epoch `at` (the brokers' first scrape, the baseline of their counters, is of load):
        warm-up until `warmup_seconds` after `load_started`, measure from then."""
        if warmup_seconds:
            self.enter("warmup", at)
        self.enter("measure", load_started + warmup_seconds if warmup_seconds else at)

    def move_measure(self, at: float) -> None:
        """A live warmupSeconds: measure begins at epoch `at`, or now if that has passed. Once measure
        has begun, it stays."""
        if self.now == "warmup":
            self.enter("measure", max(at, time.time()), drop_ahead=True)

    def measure_began(self) -> bool:
        """True once: the first time it is asked after measure began."""
        if self._measure_told or self.now != "measure":
            return False
        self._measure_told = True
        return True

    def enter(self, phase: str, at: float | None = None, drop_ahead: bool = False) -> None:
        """`phase` from epoch `at` (now by default). The phases entered ahead of time that have not begun
        by then are dropped (a run stopped in its warm-up never measures); with `drop_ahead`, all that
        have not begun now."""
        now = time.time()
        at = now if at is None else at
        keep = bisect.bisect_right(self._starts, min(at, now) if drop_ahead else at)
        keep = max(keep, self._reached + 1)
        del self._starts[keep:], self._names[keep:]
        self._starts.append(at)
        self._names.append(phase)
        if at <= now:
            self._reached = len(self._starts) - 1

    def at(self, moment: float) -> str:
        """The phase epoch `moment` fell in (or falls in, for a moment ahead)."""
        return self._names[bisect.bisect_right(self._starts, moment) - 1]

    def _current(self, now: float | None = None) -> int:
        by_clock = bisect.bisect_right(self._starts, time.time() if now is None else now) - 1
        self._reached = max(self._reached, by_clock)
        return self._reached

    @property
    def now(self) -> str:
        return self._names[self._current()]

    def of_report(self, end: float, now: float | None = None) -> str:
        """The phase a worker's report goes under: the one its end falls in, but no phase before the
        current one. The end is the worker's clock: a report of a slightly late clock arriving in the
        drain stays there, and one that ends after warm-up holds measured records even when it arrives
        a moment before the loop's clock reaches measure."""
        return self.at(max(end, self._starts[self._current(now)]))
