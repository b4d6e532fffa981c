"""What a share group's outcomes keep of records long settled: nothing but counts.

A record whose acknowledgement settled comes back only when it did not take effect (its lock had run
out, or the answer was an error), and then within about a lock duration: the broker hands an available
record to the next fetch of its partition. So once a record is settled (or its send failed, or its
acknowledgement is in doubt) and none of its producer's records at or below it has had an event for a
horizon of the group's consuming time (twice the lock duration, at least a minute), its
outcome is final: ShareOutcomes folds it into counts (rejected, void rejects, in doubt) and drops its
ranges, so the coordinator's memory follows the records in play, not the run's length. The group's
clock runs only while its consumers take records in, so a pause holds the horizon back; a live change
to a longer lock widens the horizon (never narrows it: records locked before may come back that late).

An event of a folded record after all is *late*. It is counted; the account at the end then replays
the run's journal (journal.py keeps every report) into outcomes that fold nothing, so a late record
costs memory at the end, never exactness. A dead-letter queue's ruling replays it the same way: it
needs every record."""

import math
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from dimster.worker.accounts import Account, GroupAccount

MIN_HORIZON_S = 60.0
STRETCH_S = 10.0  # the group's clock is cut into stretches of this length; one fold at most per stretch

Key = tuple[str, int]  # (group, producer)


def horizon_for(lock_ms: float) -> float:
    """Consuming time after which a settled record's outcome is final: twice its lock duration."""
    return max(MIN_HORIZON_S, 2 * lock_ms / 1000)


def lowest_sequences(c: Account) -> dict[int, int]:
    """Per producer: the lowest sequence this interval settled or had an event of."""
    lowest: dict[int, int] = {}
    for by_producer in (c.settled, c.settled_archived):
        for producer, ranges in by_producer.items():
            if ranges:
                low = min(ranges)[0]
                lowest[producer] = min(lowest.get(producer, low), low)
    for by_delivery in (c.settled_rejected, c.received_again, c.in_doubt):
        for (producer, _), ranges in by_delivery.items():
            if ranges:
                low = min(ranges)[0]
                lowest[producer] = min(lowest.get(producer, low), low)
    return lowest


@dataclass
class Folding:
    """ShareOutcomes' record of what it folded, and the clocks that say when it may."""

    horizon_s: float
    replay: Callable[[], Iterable[tuple[str, GroupAccount]]]  # every group account of the run so far, in order
    clock: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # group -> consuming seconds
    last_end: dict[str, float] = field(default_factory=dict)  # group -> end of the latest report taken in
    next_fold: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    # (group, producer) -> (stretch, lowest sequence touched in it), the last horizon's
    touched: dict[Key, deque[tuple[int, int]]] = field(default_factory=lambda: defaultdict(deque))
    folded_below: dict[Key, int] = field(default_factory=dict)  # every sequence below is folded
    late: int = 0  # events of records already folded

    def take(self, group: str, received: int, c: Account, end_time: float, covered: float) -> None:
        """Run the group's clock by what a report's interval covered (when its consumers took records
        in) and note the lowest sequences they touched."""
        if received or c.settled:
            last = self.last_end.get(group, end_time - covered)
            self.clock[group] += min(max(0.0, end_time - last), covered)
        self.last_end[group] = max(self.last_end.get(group, end_time), end_time)
        stretch = int(self.clock[group] // STRETCH_S)
        for producer, low in lowest_sequences(c).items():
            key = (group, producer)
            if low < self.folded_below.get(key, 0):
                self.late += 1
            stretches = self.touched[key]
            if stretches and stretches[-1][0] == stretch:
                stretches[-1] = (stretch, min(stretches[-1][1], low))
            else:
                stretches.append((stretch, low))

    def due(self, group: str) -> bool:
        """Whether the group's clock has run a stretch since its last fold (and the fold is then taken)."""
        if self.clock[group] < self.next_fold[group]:
            return False
        self.next_fold[group] = self.clock[group] + STRETCH_S
        return True

    def quiet_below(self, key: Key) -> float:
        """The lowest sequence touched within the horizon (inf when none was)."""
        stretches = self.touched[key]
        oldest = (self.clock[key[0]] - self.horizon_s) // STRETCH_S
        while stretches and stretches[0][0] < oldest:
            stretches.popleft()
        return min((low for _, low in stretches), default=math.inf)
