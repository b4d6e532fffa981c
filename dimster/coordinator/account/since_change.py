"""The rates since a live change, from the workers' Progress samples (protocol 21): a worker sends
one as the change reaches it and more several times a second for a few seconds, so that the status
shows what the change did within a second. The reports' rates (a report a second, over the last 5 s)
would take seconds, and until their window holds only reports from after the change, mix the two
settings."""

from dataclasses import dataclass

from dimster.worker.protocol import PROGRESS_SECONDS, Progress

TELL_AFTER = 0.5  # seconds of samples after a change before its rates go to the console, once


@dataclass
class _Counted:
    first: Progress  # taken as the change reached the worker
    latest: Progress | None = None


class RatesSinceChange:
    """Since the latest live change: each worker's first sample and its latest."""

    def __init__(self) -> None:
        self.changed_at = 0.0  # epoch seconds the change was sent (the coordinator's clock); 0: none
        self.change = 0  # its number (Update.change); 0: none
        self.workers: set[int] = set()  # the workers the change went to
        self.counted: dict[int, _Counted] = {}
        self.told = True  # its rates went to the console (none to tell before a change)

    def restart(self, changed_at: float, change: int, workers: set[int]) -> None:
        """Change number `change`, sent to `workers` at `changed_at`: its rates are counted from their
        first samples of it (a sample of an earlier change, still on its way, is not one)."""
        self.changed_at, self.change, self.workers = changed_at, change, set(workers)
        self.counted, self.told = {}, False

    def note(self, worker: int, sample: Progress) -> None:
        if sample.change != self.change or not self.change or worker not in self.workers:
            return  # of another change (or of a worker's start: paused consumers)
        if sample.first:
            self.counted[worker] = _Counted(sample)
        elif worker in self.counted and sample.at > self.counted[worker].first.at:
            self.counted[worker].latest = sample

    def rates(self, now: float) -> dict[str, float] | None:
        """pubRate, targetRate and consRate (msg/s) since the change, summed over the workers it went to,
        and `rateSeconds`, the shortest time a worker's samples cover; None until each of them has a
        sample after its first, and from PROGRESS_SECONDS after the last of them took the change (`now`:
        epoch seconds; a worker busy stopping clients may take it seconds late): by then the reports'
        window holds only whole reports from after it."""
        counted = [self.counted.get(worker) for worker in self.workers]
        pairs = [(c.first, c.latest) for c in counted if c is not None and c.latest is not None]
        if not counted or len(pairs) < len(counted):
            return None
        if now > max(first.at for first, _ in pairs) + PROGRESS_SECONDS:
            return None
        seconds = [latest.at - first.at for first, latest in pairs]
        return {
            "pubRate": sum((latest.sent - first.sent) / s for (first, latest), s in zip(pairs, seconds, strict=True)),
            "targetRate": sum(latest.target_rate for _, latest in pairs),
            "consRate": sum(
                (latest.received - first.received) / s for (first, latest), s in zip(pairs, seconds, strict=True)
            ),
            "rateSeconds": min(seconds),
        }

    def to_tell(self, now: float) -> dict[str, float] | None:
        """The change's rates, once, as soon as they cover TELL_AFTER seconds: for the console and events."""
        rates = None if self.told else self.rates(now)
        if rates is None or rates["rateSeconds"] < TELL_AFTER:
            return None
        self.told = True
        return rates

    def lose(self, worker: int) -> None:
        """A worker gone: the change's rates go on without it."""
        self.workers.discard(worker)
        self.counted.pop(worker, None)
