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
    first: Progress  # its first sample of the change: taken as the change reached the worker
    latest: Progress | None = None


class RatesSinceChange:
    """Since the latest live change: each worker's first sample and its latest."""

    def __init__(self) -> None:
        self.change = 0  # the change's number (Update.change); 0: none
        self.workers: set[int] = set()  # the workers the change went to
        self.counted: dict[int, _Counted] = {}
        self.told = True  # its rates went to the console (none to tell before a change)

    def restart(self, change: int, workers: set[int]) -> None:
        """Change number `change`, sent to `workers`: its rates are counted from their first samples of
        it (a sample of an earlier change, still on its way, is not one)."""
        self.change, self.workers, self.counted, self.told = change, set(workers), {}, False

    def note(self, worker: int, sample: Progress) -> None:
        if sample.change != self.change or not self.change or worker not in self.workers:
            return  # of another change (or of a worker's start: paused consumers)
        if worker not in self.counted:
            self.counted[worker] = _Counted(sample)  # a worker's samples come in the order it took them
        else:
            self.counted[worker].latest = sample

    def rates(self, now: float) -> dict[str, float] | None:
        """pubRate, targetRate and consRate (msg/s) since the change, summed over the workers it went to,
        and `rateSeconds`, the shortest time a worker's samples cover; None until each of them has a
        sample after its first, and from PROGRESS_SECONDS after the last of them took the change (`now`:
        epoch seconds; a worker busy stopping clients may take it seconds late): by then the reports'
        window holds only whole reports from after it."""
        pairs = [(c.first, c.latest) for c in self.counted.values() if c.latest is not None]
        if not self.workers or len(pairs) < len(self.workers):
            return None
        if now > max(first.at for first, _ in pairs) + PROGRESS_SECONDS:
            return None
        rates = {"pubRate": 0.0, "targetRate": 0.0, "consRate": 0.0}
        for first, latest in pairs:
            seconds = latest.at - first.at
            rates["pubRate"] += (latest.sent - first.sent) / seconds
            rates["consRate"] += (latest.received - first.received) / seconds
            rates["targetRate"] += latest.target_rate
        return {**rates, "rateSeconds": min(latest.at - first.at for first, latest in pairs)}

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
