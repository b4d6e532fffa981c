"""The sums of the workers' reports over one window: the console's (every few seconds) or a plan's
probe; each worker's own time, counts, and use of its host."""

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from dimster.diagnosis.generator import WorkerLoad
from dimster.metrics.histogram import Histogram
from dimster.worker.histogram_columns import HistogramWire
from dimster.worker.protocol import WorkerLine


@dataclass
class Window:
    """Sums over the reports received since the last console line."""

    seconds: dict[int, float] = field(default_factory=dict)  # worker -> time its reports covered
    by_phase: dict[str, dict[int, float]] = field(default_factory=dict)  # phase -> worker -> time covered in it
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

    def cover(self, worker: int, seconds: float, waited: float, phase: str | None = None) -> None:
        """A worker's report (of `phase`, where known) covered `seconds`, of which its wake probe waited
        `waited` to run."""
        self.seconds[worker] = self.seconds.get(worker, 0.0) + seconds
        self.waited[worker] = self.waited.get(worker, 0.0) + waited
        if phase is not None:
            covered = self.by_phase.setdefault(phase, {})
            covered[worker] = covered.get(worker, 0.0) + seconds

    def phase_seconds(self) -> dict[str, float]:
        """Per phase its reports went under, the longest time a worker's reports covered in it: a window
        that spans warm-up's end holds seconds of both."""
        return {phase: max(covered.values()) for phase, covered in self.by_phase.items() if covered}

    def use(self, line: WorkerLine, share: float, delays: HistogramWire | None) -> None:
        """A worker's line of a report: its use of its host, CPU and steal (the `share` of them that
        falls in the time it covers: a report that spans load's start covers only what follows), cores,
        and its producers' publish `delays`."""
        w = line.worker_index
        self.cpu[w] = self.cpu.get(w, 0.0) + line.cpu_seconds * share
        self.steal[w] = self.steal.get(w, 0.0) + line.steal_seconds * share
        self.cores[w] = line.cores or self.cores.get(w, 0)
        if delays:
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


class RecentRates:
    """Each worker's sent, target and received records over its reports of the last few seconds
    (each of `windows`, counted back from its own latest report), summed again at each of its reports, so
    that the status's rates cost a sum over the workers, not over every report of the window. A worker
    whose latest report is more than the longest window older than the newest one drops out. After a
    live change (`clear(at)`), a report that began before it (it mixes the two settings) is not counted."""

    def __init__(self, windows: tuple[float, ...]):
        self.windows = windows
        self.clear()

    def clear(self, at: float = 0.0) -> None:
        self.counted_from = at  # epoch seconds: a report whose time begins before it is not counted
        # worker -> its reports' (end, covered, sent, target x covered, received) of the longest window
        self._rows: dict[int, deque[tuple[float, float, int, float, int]]] = defaultdict(deque)
        # window -> worker -> [covered, sent, target x covered, received] of its rows in that window
        self._sums: dict[float, dict[int, list[float]]] = {seconds: {} for seconds in self.windows}
        self._latest: dict[int, float] = {}
        self._newest = 0.0

    def add(
        self, worker: int, end: float, covered: float, sent: int, target: float, received: int, since: float
    ) -> None:
        if since < self.counted_from:
            return
        latest = self._latest[worker] = max(self._latest.get(worker, end), end)
        self._newest = max(self._newest, end)
        rows = self._rows[worker]
        rows.append((end, covered, sent, target * covered, received))
        while rows[0][0] < latest - max(self.windows):
            rows.popleft()
        # summed again from its rows (a few a worker), not kept up by adding and taking away: a rate
        # that fell to 0 reads 0, not what float rounding left over
        for seconds in self.windows:
            within = [row for row in rows if row[0] >= latest - seconds]  # never empty: the latest row is in
            self._sums[seconds][worker] = [sum(column) for column in list(zip(*within, strict=True))[1:]]

    def _live(self, seconds: float) -> list[list[float]]:
        oldest = self._newest - max(self.windows)
        return [s for w, s in self._sums[seconds].items() if s[0] > 0 and self._latest[w] >= oldest]

    def covered(self, seconds: float) -> float:
        """The longest time a worker's reports of the `seconds` window cover (0 when none)."""
        return max((s[0] for s in self._live(seconds)), default=0.0)

    def rates(self, seconds: float) -> dict[str, float]:
        """pubRate, targetRate and consRate in msg/s: each worker's counts over the time its reports
        covered, summed over workers. `seconds`: one of the windows."""
        live = self._live(seconds)
        return {
            "pubRate": sum(s[1] / s[0] for s in live),
            "targetRate": sum(s[2] / s[0] for s in live),
            "consRate": sum(s[3] / s[0] for s in live),
        }
