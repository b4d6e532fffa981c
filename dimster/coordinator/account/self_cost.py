"""What the coordinator itself costs while load runs: its process's CPU, how late worker reports reach
it (an interval's end on the worker to its handling here) and how late console lines come out. With
many agents these say whether the coordinator keeps up; a run records them in run.json."""

import contextlib
import gc
import time
from collections.abc import Iterator

import psutil

from dimster.metrics.histogram import Histogram
from dimster.results.records import CoordinatorCost, LatencyBrief

# Python's cyclic collector passes over its youngest objects every 700 allocations by default; the
# loop makes and drops a few hundred small containers per report (its clients' intervals), and those
# passes cost it some 15 % of its CPU at 256 workers (scripts/bench/coordinator_scale.py). Garbage in
# cycles then waits for 200,000 allocations: some MB, tens at most (at 1,024 workers the collector took
# 7 % of the coordinator's CPU at 50,000 allocations, 3 % at 200,000: docs/benchmarks.md).
COLLECT_EVERY = 200_000


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """The collector's youngest generation collected every COLLECT_EVERY allocations, as it was after."""
    before = gc.get_threshold()
    gc.set_threshold(COLLECT_EVERY, before[1], before[2])
    try:
        yield
    finally:
        gc.set_threshold(*before)


class SelfCost:
    def __init__(self):
        self.report_lag = Histogram()  # µs from a report's end (coordinator clock) to its handling
        self.console_lag = Histogram()  # µs from a console line's due time to its printing
        self.report_lines = 0  # the workers' lines of the reports handled (an agent's report has one a worker)
        self._process = psutil.Process()
        self._cpu_start: float | None = None
        self._wall_start = 0.0
        self._cpu_seconds = 0.0
        self._wall_seconds = 0.0

    def start(self) -> None:
        times = self._process.cpu_times()
        self._cpu_start, self._wall_start = times.user + times.system, time.monotonic()

    def stop(self) -> None:
        if self._cpu_start is not None:
            times = self._process.cpu_times()
            self._cpu_seconds = times.user + times.system - self._cpu_start
            self._wall_seconds = time.monotonic() - self._wall_start
            self._cpu_start = None

    def report_handled(self, report_end: float, lines: int = 1) -> None:
        self.report_lag.record(max(0.0, time.time() - report_end) * 1e6)
        self.report_lines += lines

    def line_printed(self, due: float) -> None:
        self.console_lag.record(max(0.0, time.time() - due) * 1e6)

    def as_record(self) -> CoordinatorCost:
        share = self._cpu_seconds / self._wall_seconds if self._wall_seconds else None
        return {
            "cpu_seconds": round(self._cpu_seconds, 3),
            "cpu_share_of_one_core": None if share is None else round(share, 4),
            "report_lag_ms": latency_brief(self.report_lag),  # its count: the reports handled while load ran
            "report_lines": self.report_lines,
            "console_lag_ms": latency_brief(self.console_lag),
        }


def latency_brief(histogram: Histogram) -> LatencyBrief:
    """Count, p50, p99 and max of a histogram of microseconds, in milliseconds (None when empty)."""

    def ms(q: float) -> float | None:
        value = histogram.percentile(q)
        return None if value is None else round(value / 1000, 3)

    return {"p50": ms(50), "p99": ms(99), "max": ms(100), "count": histogram.total}
