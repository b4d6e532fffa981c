"""The seam between the run loop and its workers: the coordinator deals only in protocol messages
and `WorkerLost`, through `Workers`; tests drive the loop with an in-memory fake of it."""

from dataclasses import dataclass
from typing import Protocol

from dimster.results.records import ClockOffset
from dimster.worker.protocol import Assignment, Message


@dataclass
class WorkerLost:
    """Not a message of the wire: a worker gone (process exited, agent silent or unreachable)."""

    reason: str
    # epoch seconds by which its clients had surely stopped: what they did after their last report
    # (coordinator/account/lost_tails.py) is in doubt up to then
    stopped_by: float


class Workers(Protocol):
    def start(self, assignments: list[Assignment]) -> None:
        """Start one worker per assignment (assignment i on worker i)."""

    def send(self, index: int, message: Message) -> None:
        """Deliver a message to worker `index`; a lost or closed worker drops it."""

    def receive(self, timeout: float, doorbell: int | None = None) -> list[tuple[int, Message | WorkerLost]]:
        """What the workers sent within `timeout`, and workers found lost (each reported once); the
        wait ends early when the `doorbell` file descriptor is readable (a control request waits)."""

    def close(self) -> list[str]:
        """End whatever is left once the run closed its workers; returns what had to be killed."""

    def describe(self) -> list[dict]:
        """Per worker: index, where it runs (host, pid) and whether it is alive; for status and run.json."""

    def clock_offsets(self) -> dict[int, ClockOffset]:
        """Per worker: its clock's estimated offset to the coordinator's and that estimate's uncertainty."""
