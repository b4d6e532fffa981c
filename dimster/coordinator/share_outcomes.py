"""A share group's rejected and archived records, each counted once, and each by what its last delivery
met. A record comes back only if its earlier deliveries' acknowledgements did not take effect, yet a
client may hear "settled" for one whose lock had run out before it arrived (seen with the Java client
on Kafka 4.3 and 4.4): a reject so answered, of a record received again on a later delivery, is void.
The record counts by its later delivery instead (accepted, rejected again, or archived)."""

from collections import defaultdict

from dimster.metrics.sequences import RangeSet
from dimster.worker.protocol import ClientInterval

OUTCOMES = ("rejected", "archived")
Ranges = list[tuple[int, int]]


def _sequences(ranges: Ranges):
    for first, last in ranges:
        yield from range(first, last + 1)


class ShareOutcomes:
    def __init__(self) -> None:
        self.sets: dict[tuple[str, str, int], RangeSet] = defaultdict(RangeSet)  # (outcome, group, producer)
        self.counts: dict[tuple[str, str], int] = defaultdict(int)  # (outcome, group): distinct records
        # (group, producer) -> delivery count -> its records rejected, and its records received (from 2 on)
        self.rejected_on: dict[tuple[str, int], dict[int, RangeSet]] = defaultdict(dict)
        self.received_on: dict[tuple[str, int], dict[int, RangeSet]] = defaultdict(dict)
        # (group, producer) -> records rejected on one delivery and received on a later one
        self.in_question: dict[tuple[str, int], set[int]] = defaultdict(set)

    def add(self, c: ClientInterval) -> None:
        for (producer_id, delivery), ranges in c.settled_rejected.items():
            self._add("rejected", c.group, producer_id, ranges)
            self._note(self.rejected_on, self.received_on, (c.group, producer_id), delivery, ranges, later=True)
        for producer_id, ranges in c.settled_archived.items():
            self._add("archived", c.group, producer_id, ranges)
        for (producer_id, delivery), ranges in c.received_again.items():
            self._note(self.received_on, self.rejected_on, (c.group, producer_id), delivery, ranges, later=False)

    def _add(self, outcome: str, group: str, producer_id: int, ranges: Ranges) -> None:
        ranges_of = self.sets[(outcome, group, producer_id)]
        for first, last in ranges:
            self.counts[(outcome, group)] += last - first + 1 - ranges_of.add(first, last)

    def _note(self, mine, others, key: tuple[str, int], delivery: int, ranges: Ranges, later: bool) -> None:
        """Add `ranges` to `mine` at `delivery`; records also in `others` at a later delivery (`later`),
        or an earlier one, are in question."""
        by_delivery = mine[key]
        ranges_of = by_delivery.setdefault(delivery, RangeSet())
        for first, last in ranges:
            ranges_of.add(first, last)
        against = [s for d, s in others.get(key, {}).items() if (d > delivery if later else d < delivery)]
        if against:
            self.in_question[key].update(s for s in _sequences(ranges) if any(s in other for other in against))

    def _void(self, key: tuple[str, int], sequence: int) -> bool:
        """Whether the record's rejects all came on deliveries before one it was received on."""
        rejected = max(d for d, s in self.rejected_on[key].items() if sequence in s)
        return any(d > rejected and sequence in s for d, s in self.received_on[key].items())

    def voided(self, group: str) -> dict[int, set[int]]:
        """Per producer: the group's records whose reject did not take effect."""
        return {
            producer: void
            for (g, producer), sequences in self.in_question.items()
            if g == group and (void := {s for s in sequences if self._void((g, producer), s)})
        }

    def count(self, outcome: str, group: str) -> int:
        """The group's distinct records that ended so."""
        n = self.counts.get((outcome, group), 0)
        return n - sum(map(len, self.voided(group).values())) if outcome == "rejected" else n

    def holds(self, outcome: str, group: str, producer_id: int, sequence: int) -> bool:
        """Whether this record ended so."""
        ranges = self.sets.get((outcome, group, producer_id))
        if ranges is None or sequence not in ranges:
            return False
        return (
            outcome != "rejected"
            or sequence not in self.in_question.get((group, producer_id), ())
            or not (self._void((group, producer_id), sequence))
        )
