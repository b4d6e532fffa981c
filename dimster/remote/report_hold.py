"""An agent's workers' reports, held until each of them has one for the interval and then sent as one
(protocol 20, worker/report_merge.py): the coordinator then takes in a report an agent a second, not
one a worker. The workers of a host report at the same whole seconds of its clock
(worker/process.py's report_tick), so holding costs little: a report waits for the others at most
HOLD_SECONDS (a worker late because its host is busy, or one that no longer reports), then goes
with those that came."""

from dimster.worker.protocol import IntervalReport, Reported
from dimster.worker.report_merge import merged

HOLD_SECONDS = 0.25
HELD_BYTES = 16 * 2**20  # held reports this large go at once (a coordinator takes 64 MiB a message)


class ReportHold:
    """The reports of one run's workers held for the interval (the agent's Session has one)."""

    def __init__(self) -> None:
        self.held: dict[int, Reported] = {}  # worker index -> its report of the interval
        self.since = 0.0  # when the first of them came
        self.bytes = 0  # their size as they came

    def take(self, index: int, reported: Reported, now: float, workers: set[int]) -> list[Reported]:
        """Worker `index`'s report; what is due to go now: the held reports, when each of the
        `workers` (those of the run still open) has one, or the earlier ones when this worker's
        previous report is still held (it goes first), or when they have grown to HELD_BYTES."""
        due = self.release() if index in self.held else []
        if not self.held:
            self.since = now
        self.held[index] = reported
        self.bytes += len(reported.received)
        if set(self.held) >= workers or self.bytes >= HELD_BYTES:
            due += self.release()
        return due

    def wait(self, now: float) -> float | None:
        """Seconds until the held reports are due (0: now), None when none is held."""
        return max(0.0, self.since + HOLD_SECONDS - now) if self.held else None

    def release(self) -> list[Reported]:
        """The held reports as one message (none when none is held): one report stays as it came."""
        held = [self.held[index] for index in sorted(self.held)]
        self.held, self.bytes = {}, 0
        if len(held) <= 1:
            return held
        report: IntervalReport = merged([reported.report for reported in held])
        return [Reported(report)]
