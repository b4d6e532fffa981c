"""What the consumers of a lost worker may have settled after their last report, which never reached the
coordinator: records of their group in doubt. Bounded by counting and by identity, not by a rate: they
can have settled no record that their group had settled by their last report, and none that a producer
sent after they had surely stopped. (A bound of their last receive rate times the time since their
last report fell short on a busy host, where a worker's reports trail and its records come in bursts,
and called records lost that its consumers had acknowledged.)

Workers lost at the same moment (a run's end that gives up thousands at once) leave one tail per
group: a tail's bound already covers what the whole group could have settled since, so a tail per
worker counted those records once per worker, and summing them cost a pass over the producers each."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dimster.metrics.sequences import RangeSet


@dataclass
class Tail:
    """The unreported tail of one lost worker's consumers of `group`."""

    group: str
    settled_then: int  # the group's settled records as of the earliest of their last reports (0: none)
    stopped_by: float  # epoch seconds by which they had surely stopped
    # each producer's next sequence once every live worker's reports reached past `stopped_by`: what
    # they sent later cannot be the tail's (None until then)
    below: dict[int, int] | None = None


class LostTails:
    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, int]] = {}  # consumer -> (group, its settled records after its last report)
        self.tails: list[Tail] = []
        self.lost_workers: set[int] = set()

    def reported(self, client_ids: Iterable[str], groups: Iterable[str], settled_by_group: dict[str, int]) -> None:
        """Consumers whose report was just taken in, with its settled records counted."""
        self.seen.update((c, (g, settled_by_group[g])) for c, g in zip(client_ids, groups, strict=True))

    def lose(self, worker: int | None, consumers: list[str], stopped_by: float, groups: dict[str, str]) -> None:
        """Worker `worker`'s consumers are gone, stopped by `stopped_by` at the latest. One that never
        reported (its group from `groups`) may have settled any record of its group."""
        if worker is not None:
            self.lost_workers.add(worker)
        earliest: dict[str, int] = {}
        for client_id in consumers:
            if client_id in self.seen:
                group, settled = self.seen.pop(client_id)
            elif client_id in groups:
                group, settled = groups[client_id], 0
            else:
                continue
            earliest[group] = min(settled, earliest.get(group, settled))
        open_by = {(t.group, t.stopped_by): t for t in self.tails if t.below is None}
        for group, settled in earliest.items():
            if (tail := open_by.get((group, stopped_by))) is not None:  # lost together: one tail
                tail.settled_then = min(tail.settled_then, settled)
            else:
                self.tails.append(Tail(group, settled, stopped_by))

    def end_due(self, last_report: dict[int, float], sent: Callable[[str], dict[int, int]]) -> None:
        """Cap the tails whose end every live worker's last report (`last_report`: worker -> its end)
        has passed by what their group's producers have sent by now (`sent(group)`)."""
        reached = min((end for w, end in last_report.items() if w not in self.lost_workers), default=float("-inf"))
        for tail in self.tails:
            if tail.below is None and tail.stopped_by <= reached:
                tail.below = sent(tail.group)

    @property
    def open(self) -> list[Tail]:
        return [t for t in self.tails if t.below is None]

    def bound(self, group: str, acked: int, sent: dict[int, int], settled: Callable[[int], RangeSet]) -> int:
        """The group's records the lost workers' consumers may have settled unreported: per tail, what
        its topic has acknowledged by now (`acked`) beyond what the group had settled then, and no more
        than the group's records still unsettled (`settled(producer)`) below where the producers were
        when the tail ended (for a tail not ended yet: where they are now, `sent`). Records whose send
        failed count among the unsettled: the bound errs on the side of doubt."""
        total = 0
        for tail in (t for t in self.tails if t.group == group):
            below = sent if tail.below is None else tail.below
            missing = sum(settled(producer).missing_below(n) for producer, n in below.items())
            total += min(max(0, acked - tail.settled_then), missing)
        return total
