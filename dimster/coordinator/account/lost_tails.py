"""What the consumers of a lost worker may have settled after their last report, which never reached the
coordinator: records of their group in doubt. Bounded by counting and by identity, not by a rate: they
can have settled no record that their group had settled by their last report, and none that a producer
sent after they had surely stopped. (A bound of their last receive rate times the time since their
last report fell short on a busy host, where a worker's reports trail and its records come in bursts,
and called records lost that its consumers had acknowledged.)"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass
class Tail:
    """The unreported tail of one lost worker's consumers of `group`."""

    group: str
    settled_then: int  # the group's settled records as of the earliest of their last reports
    stopped_by: float  # epoch seconds by which they had surely stopped


@dataclass
class EndedTail:
    """A tail whose end every live worker's reports have passed: at most `most` records, all below
    `below` (producer id -> its next sequence then); None where that is not known."""

    group: str
    most: int
    below: dict[int, int] | None


class LostTails:
    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, int]] = {}  # consumer -> (group, its settled records after its last report)
        self.open: list[Tail] = []  # tails whose end the live workers' reports have not passed yet
        self.ended: list[EndedTail] = []
        self.lost_workers: set[int] = set()

    def reported(self, client_ids: Iterable[str], groups: Iterable[str], settled_by_group: dict[str, int]) -> None:
        """Consumers whose report was just taken in, with its settled records counted."""
        self.seen.update((c, (g, settled_by_group[g])) for c, g in zip(client_ids, groups, strict=True))

    def lose(self, worker: int | None, client_ids: list[str], stopped_by: float) -> None:
        """Worker `worker`'s clients are gone; its consumers stopped by `stopped_by` at the latest."""
        if worker is not None:
            self.lost_workers.add(worker)
        earliest: dict[str, int] = {}
        for client_id in client_ids:
            if client_id in self.seen:
                group, settled = self.seen.pop(client_id)
                earliest[group] = min(settled, earliest.get(group, settled))
        self.open += [Tail(group, settled, stopped_by) for group, settled in earliest.items()]

    def end_due(
        self, last_report: dict[int, float], acked: Callable[[str], int], sent: Callable[[str], dict[int, int]]
    ) -> None:
        """End the tails that every live worker's last report (`last_report`: worker -> its end) has
        passed: what the group's topic has acknowledged (`acked(group)`) and its producers have sent
        (`sent(group)`) by now is all the tail can hold."""
        reached = min((end for w, end in last_report.items() if w not in self.lost_workers), default=float("-inf"))
        for tail in [t for t in self.open if t.stopped_by <= reached]:
            self.open.remove(tail)
            self.ended.append(EndedTail(tail.group, max(0, acked(tail.group) - tail.settled_then), sent(tail.group)))

    def bound(self, group: str, acked_now: int, missing_below: Callable[[dict[int, int]], int]) -> int:
        """The group's records the lost workers' consumers may have settled unreported: for an ended tail
        its count, at most the group's records still missing below where its producers were then
        (`missing_below`); for a tail not ended yet, all its topic has acknowledged since."""
        ended = sum(
            t.most if t.below is None else min(t.most, missing_below(t.below)) for t in self.ended if t.group == group
        )
        return ended + sum(max(0, acked_now - t.settled_then) for t in self.open if t.group == group)
