"""Each worker's line of a report (protocol 20: an agent's report has one for each of its workers)
against that worker's previous one: the time it covers, and its counts as the console's instant and
the status's recent rates keep them per worker; and the status's rates since a live change."""

from collections import Counter
from dataclasses import dataclass

import numpy as np

from dimster.coordinator.account.since_change import RatesSinceChange
from dimster.coordinator.account.window import RecentRates
from dimster.coordinator.control.console import OneInstant
from dimster.worker.protocol import IntervalReport

PACING_WINDOW = 10.0  # seconds over which the achieved producer rate is compared with the target
STATUS_WINDOW = 5.0  # seconds of the status's achieved rates


@dataclass
class LineSpan:
    """What one worker's line of a report covers."""

    worker: int
    end: float
    since: float  # where the time it covers starts: its previous report's end, or load's start
    covered: float  # seconds of load it covers (0 before load starts)
    share: float  # the part of its CPU, steal and wait figures that falls within `covered`
    waited: float  # seconds its wake probe waited to run within `covered` (its share of the line's)


class WorkerLines:
    """Per worker: its last report's end, when it was last heard of, its cumulative counts at each
    report (the console's one instant) and its recent rates (the status's)."""

    def __init__(self) -> None:
        self.last_report: dict[int, float] = {}  # worker -> end time of its previous report
        self.heard: dict[int, float] = {}  # worker -> when its last report was taken in (this clock)
        self.recent = RecentRates((STATUS_WINDOW, PACING_WINDOW))
        self.instant = OneInstant()  # sent, acked, received as of one instant, for the console line
        self.since_change = RatesSinceChange()  # the workers' Progress samples after a live change
        self.before = {"pubRate": 0.0, "targetRate": 0.0, "consRate": 0.0, "rateSeconds": 0.0}  # see restart

    def spans(self, report: IntervalReport, load_started: float, now: float) -> list[LineSpan]:
        """Each line's span; its worker's clock moves on to the line's end."""
        spans = []
        for line in report.lines:
            # a worker reports before load starts too (while consumers join): count time from load start
            last = self.last_report.get(line.worker_index, 0.0)
            since = max(last, load_started)
            covered = max(0.0, line.end_time - since) if since else 0.0
            self.last_report[line.worker_index], self.heard[line.worker_index] = line.end_time, now
            spanned = line.end_time - last if last else covered  # the time its CPU and steal figures cover
            share = covered / spanned if spanned > 0 else 0.0
            # a line that spans load's start: only its share of the wait falls in the time it covers
            waited = line.wake_lag.lag_ms_sum / 1000 * share if line.wake_lag else 0.0
            spans.append(LineSpan(line.worker_index, line.end_time, since, covered, share, waited))
        return spans

    def note(
        self, spans: list[LineSpan], sent: np.ndarray, acked: np.ndarray, received: np.ndarray, target: np.ndarray
    ) -> None:
        """The lines' counts (each an array, a value a line): the instant's and the recent rates'."""
        rows = zip(spans, sent.tolist(), acked.tolist(), received.tolist(), target.tolist(), strict=True)
        for span, sent_, acked_, received_, target_ in rows:
            counts = (round(sent_), round(acked_), round(received_))
            self.instant.note(span.worker, span.end, counts, span.since)
            self.recent.add(span.worker, span.end, span.covered, counts[0], target_, counts[2], span.since)

    def restart(self, at: float, change: int, workers: set[int]) -> None:
        """After live change number `change`, sent to `workers` at `at` (epoch seconds): the recent
        rates count reports from after it, the status's rates in between come from their Progress
        samples, and until either knows anything, the status keeps the rates it had."""
        self.before = self.status_rates(at)
        self.recent.clear(at)
        self.since_change.restart(change, workers)

    def status_rates(self, now: float) -> dict[str, float]:
        """The status's pubRate, targetRate and consRate, and the seconds they cover: since the last
        live change while it is recent (RatesSinceChange), else over the last STATUS_WINDOW of reports
        (those from after the change), else what they were before it (nothing after it known yet)."""
        since_change = self.since_change.rates(now)
        if since_change is not None:
            return since_change
        covered = self.recent.covered(STATUS_WINDOW)
        if covered == 0:
            return self.before
        return {**self.recent.rates(STATUS_WINDOW), "rateSeconds": covered}


def count_settled(
    counted: list[Counter], group: str, settled: int, of_group: np.ndarray, lines: np.ndarray, took: np.ndarray
) -> None:
    """A plan's probe: the group's newly settled records shared among the report's lines by what its
    consumers on each line received (all to the first when none received)."""
    weights = np.bincount(lines[of_group], weights=took[of_group], minlength=len(counted))
    shares = weights / weights.sum() if weights.sum() else np.eye(len(counted))[0]
    for line, share in zip(counted, shares.tolist(), strict=True):
        line["settled", group] += settled * share
