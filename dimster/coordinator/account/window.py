"""The sums of the workers' reports over one window: the console's (every few seconds) or a plan's
probe; each worker's own time, counts, and use of its host."""

from collections import Counter
from dataclasses import dataclass, field

from dimster.diagnosis.generator import WorkerLoad
from dimster.metrics.histogram import Histogram
from dimster.worker.protocol import IntervalReport


@dataclass
class Window:
    """Sums over the reports received since the last console line."""

    seconds: dict[int, float] = field(default_factory=dict)  # worker -> time its reports covered
    waited: dict[int, float] = field(default_factory=dict)  # worker -> seconds its wake probe waited to run
    cpu: dict[int, float] = field(default_factory=dict)  # worker -> CPU seconds of its process
    steal: dict[int, float] = field(default_factory=dict)  # worker -> its host's steal seconds
    cores: dict[int, int] = field(default_factory=dict)  # worker -> the cores it may use
    publish_delay: dict[int, Histogram] = field(default_factory=dict)  # worker -> its producers' lateness
    sent: int = 0
    received: int = 0
    polls: int = 0
    max_poll_records: int = 0
    e2e: Histogram = field(default_factory=Histogram)
    publish: Histogram = field(default_factory=Histogram)
    # a plan's probe: worker -> counts by ("sent",), ("acked", topic), ("settled", group)
    by_worker: dict[int, Counter] = field(default_factory=dict)

    def cover(self, worker: int, seconds: float, waited: float) -> None:
        """A worker's report covered `seconds`, of which its wake probe waited `waited` to run."""
        self.seconds[worker] = self.seconds.get(worker, 0.0) + seconds
        self.waited[worker] = self.waited.get(worker, 0.0) + waited

    def use(self, report: IntervalReport, share: float) -> None:
        """A worker's report's use of its host: CPU and steal (the `share` of them that falls in the
        time it covers: a report that spans load's start covers only what follows), cores, and its
        producers' publish delay."""
        w = report.worker_index
        self.cpu[w] = self.cpu.get(w, 0.0) + report.cpu_seconds * share
        self.steal[w] = self.steal.get(w, 0.0) + report.steal_seconds * share
        self.cores[w] = report.cores or self.cores.get(w, 0)
        if delays := report.histograms.by_metric.get("publish_delay"):
            self.publish_delay.setdefault(w, Histogram()).merge_wire(delays)

    def loads(self) -> list[WorkerLoad]:
        """Each worker's use of its host over the window (diagnosis/generator.py)."""

        def p99_ms(worker: int) -> float | None:
            delays = self.publish_delay.get(worker)
            value = delays.percentile(99) if delays is not None else None
            return None if value is None else value / 1000

        loads = []
        for w, seconds in sorted(self.seconds.items()):
            if seconds > 0:
                used = (self.waited.get(w, 0.0), self.cpu.get(w, 0.0), self.steal.get(w, 0.0), self.cores.get(w, 0))
                loads.append(WorkerLoad(w, seconds, *used, publish_delay_p99_ms=p99_ms(w)))
        return loads

    def wait_share(self) -> float | None:
        """The largest share of its covered time any worker's wake probe waited to run (wake_lag.py)."""
        shares = [min(1.0, waited / self.seconds[w]) for w, waited in self.waited.items() if self.seconds.get(w)]
        return max(shares, default=None)

    def rate(self, key: tuple) -> float:
        """Per second, each worker's count over the time its own reports covered, summed."""
        return sum(counts[key] / self.seconds[w] for w, counts in self.by_worker.items() if self.seconds.get(w))
