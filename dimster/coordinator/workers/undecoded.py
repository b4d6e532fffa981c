"""A pass's reports, decoded together at its end (RemoteWorkers.receive): decoding them one after
another, not each between socket reads, finds the decoder's code and tables in the caches (a
thousand workers' reports: docs/benchmarks.md, "Reports decoded at the end of a pass")."""

from dataclasses import dataclass
from typing import Any

from dimster.coordinator.workers.seam import WorkerLost
from dimster.worker.protocol import Message

Taken = tuple[int, Message | WorkerLost]


@dataclass
class Undecoded:
    """A report as it came, in its place among a pass's messages; `taken`, once decoded: the report
    (after its worker's index), or the agent's workers lost when it did not decode."""

    link: Any  # the AgentLink it came from
    worker: int | None  # the index of the worker it came from; None: the agent's own
    data: bytes
    lines: int  # the workers' lines it is taken to carry (a pass takes MOST_A_PASS at most)
    taken: list[Taken] | None = None


def in_place(received: list[tuple[int, Message | WorkerLost | Undecoded]]) -> list[Taken]:
    """The pass's messages, each report as what it was decoded to, where it came."""
    taken: list[Taken] = []
    for index, message in received:
        if isinstance(message, Undecoded):
            assert message.taken is not None, "a report left undecoded at the end of its pass"
            taken += message.taken
        else:
            taken.append((index, message))
    return taken
