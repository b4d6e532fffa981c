"""A share group's rejected and archived records, each counted once, and each by what its last delivery
met; its records in doubt; and, at the end of a run with a dead-letter queue, the topic's word on them.

A record comes back only if its earlier deliveries' acknowledgements did not take effect, yet a
client may hear "settled" for one whose lock had run out before it arrived (seen with the Java client
on Kafka 4.3 and 4.4): a reject so answered, of a record received again on a later delivery, is void.
The record counts by its later delivery instead (accepted, rejected again, or archived).

An acknowledgement answered with an error, or never answered (the broker went away), may or may not
have taken effect: its record is in doubt, and counts as such, unless it comes back (it did not) and
settles by its later delivery.

With a dead-letter queue the broker's topic is the referee (`rule`): every record there is rejected
or archived (as dimster saw it, or by the broker's own cause where dimster had it otherwise), and a
record dimster counted rejected or archived that is not there is in doubt."""

from collections import defaultdict
from dataclasses import dataclass, field

from dimster.metrics.sequences import RangeSet, gaps
from dimster.worker.protocol import ClientInterval

OUTCOMES = ("rejected", "archived")
Ranges = list[tuple[int, int]]
Record = tuple[int, int]  # (producer id, sequence)


@dataclass
class Ruling:
    """The dead-letter topic's word on one group's records (ShareOutcomes.rule)."""

    outcome: dict[Record, str]  # every record found there: rejected or archived
    found_unsettled: int  # found there, yet not settled by dimster's count (in doubt, or never answered)
    unconfirmed: set[Record]  # counted rejected or archived by dimster, not found there: in doubt
    corrected: list[dict] = field(default_factory=list)  # each record dimster had counted otherwise


class ShareOutcomes:
    def __init__(self) -> None:
        self.sets: dict[tuple[str, str, int], RangeSet] = defaultdict(RangeSet)  # (outcome, group, producer)
        self.counts: dict[tuple[str, str], int] = defaultdict(int)  # (outcome, group): distinct records
        # (group, producer) -> delivery count -> its records rejected, received (from 2 on), in doubt
        self.rejected_on: dict[tuple[str, int], dict[int, RangeSet]] = defaultdict(dict)
        self.received_on: dict[tuple[str, int], dict[int, RangeSet]] = defaultdict(dict)
        self.doubted_on: dict[tuple[str, int], dict[int, RangeSet]] = defaultdict(dict)
        # (group, producer) -> records rejected on one delivery and received on a later one
        self.in_question: dict[tuple[str, int], RangeSet] = defaultdict(RangeSet)
        self.rulings: dict[str, Ruling] = {}  # group -> the dead-letter topic's word, once read

    def add(self, c: ClientInterval) -> None:
        for (producer_id, delivery), ranges in c.settled_rejected.items():
            self._add("rejected", c.group, producer_id, ranges)
            self._note(self.rejected_on, self.received_on, (c.group, producer_id), delivery, ranges, later=True)
        for producer_id, ranges in c.settled_archived.items():
            self._add("archived", c.group, producer_id, ranges)
        for (producer_id, delivery), ranges in c.received_again.items():
            self._note(self.received_on, self.rejected_on, (c.group, producer_id), delivery, ranges, later=False)
        for (producer_id, delivery), ranges in c.in_doubt.items():
            self._note(self.doubted_on, {}, (c.group, producer_id), delivery, ranges, later=False)

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
        for other in against:  # by range: what both hold
            for first, last in ranges:
                for both in other.within(first, last):
                    self.in_question[key].add(*both)

    def _received_after(self, key: tuple[str, int], delivery: int, sequence: int) -> bool:
        return any(d > delivery and sequence in s for d, s in self.received_on.get(key, {}).items())

    def _void(self, key: tuple[str, int], sequence: int) -> bool:
        """Whether the record's rejects all came on deliveries before one it was received on."""
        rejected = max(d for d, s in self.rejected_on[key].items() if sequence in s)
        return self._received_after(key, rejected, sequence)

    def voided(self, group: str) -> dict[int, set[int]]:
        """Per producer: the group's records whose reject did not take effect."""
        return {
            producer: void
            for (g, producer), sequences in self.in_question.items()
            if g == group and (void := {s for s in sequences.values() if self._void((g, producer), s)})
        }

    def _own_count(self, outcome: str, group: str) -> int:
        n = self.counts.get((outcome, group), 0)
        return n - sum(map(len, self.voided(group).values())) if outcome == "rejected" else n

    def _own_holds(self, outcome: str, group: str, producer_id: int, sequence: int) -> bool:
        ranges = self.sets.get((outcome, group, producer_id))
        if ranges is None or sequence not in ranges:
            return False
        return (
            outcome != "rejected"
            or sequence not in self.in_question.get((group, producer_id), RangeSet())
            or not (self._void((group, producer_id), sequence))
        )

    def count(self, outcome: str, group: str) -> int:
        """The group's distinct records that ended so (by the dead-letter topic's word once it ruled)."""
        ruling = self.rulings.get(group)
        if ruling is not None:
            return sum(1 for o in ruling.outcome.values() if o == outcome)
        return self._own_count(outcome, group)

    def holds(self, outcome: str, group: str, producer_id: int, sequence: int) -> bool:
        """Whether this record ended so."""
        ruling = self.rulings.get(group)
        if ruling is not None:
            return ruling.outcome.get((producer_id, sequence)) == outcome
        return self._own_holds(outcome, group, producer_id, sequence)

    def doubtful(self, group: str) -> dict[int, RangeSet]:
        """Per producer, the group's records whose acknowledgement was answered with an error or never
        answered on their latest delivery (none came after), found by range."""
        found: dict[int, RangeSet] = defaultdict(RangeSet)
        for (g, producer), by_delivery in self.doubted_on.items():
            if g != group:
                continue
            received = self.received_on.get((g, producer), {})
            for delivery, ranges in by_delivery.items():
                later = [s for d, s in received.items() if d > delivery]
                for first, last in ranges.ranges():
                    for piece in gaps(first, last, [both for s in later for both in s.within(first, last)]):
                        found[producer].add(*piece)
        return found

    def doubtful_count(self, group: str) -> int:
        """The group's records in doubt: those `doubtful` holds that the dead-letter topic did not rule
        on, and those it did not confirm."""
        found = self.doubtful(group)
        ruling = self.rulings.get(group)
        count = sum(ranges.count() for ranges in found.values())
        if ruling is not None:  # the unconfirmed are not among the ruled
            none = RangeSet()
            count -= sum(1 for producer, sequence in ruling.outcome if sequence in found.get(producer, none))
            count += sum(1 for producer, sequence in ruling.unconfirmed if sequence not in found.get(producer, none))
        return count

    def settled_correction(self, group: str) -> int:
        """What the dead-letter topic's word adds to the group's settled records: those found there that
        dimster had not settled, less those dimster counted rejected or archived that are not there."""
        ruling = self.rulings.get(group)
        return 0 if ruling is None else ruling.found_unsettled - len(ruling.unconfirmed)

    def rule(self, group: str, letters: dict[Record, str], settled: dict[int, RangeSet]) -> Ruling:
        """The dead-letter topic's word on `group`: `letters` every record found there with the broker's
        cause (rejected: the client rejected it; archived: its delivery count ran out), `settled` the
        group's settled sequences per producer as dimster counted them."""
        outcome: dict[Record, str] = {}
        corrected, found_unsettled = [], 0
        for (producer, sequence), cause in sorted(letters.items()):
            own = next((o for o in OUTCOMES if self._own_holds(o, group, producer, sequence)), None)
            outcome[(producer, sequence)] = own or cause
            is_settled = sequence in settled.get(producer, RangeSet())
            found_unsettled += 0 if is_settled else 1
            if own is None:
                counted = "accepted" if is_settled else "not settled"
                corrected.append(self.story(group, producer, sequence, counted, cause))
        unconfirmed = set()
        for o in OUTCOMES:
            for (outcome_name, g, producer), ranges in self.sets.items():
                if outcome_name != o or g != group:
                    continue
                for first, last in ranges.ranges():
                    for sequence in range(first, last + 1):
                        if (producer, sequence) not in outcome and self._own_holds(o, group, producer, sequence):
                            unconfirmed.add((producer, sequence))
                            corrected.append(self.story(group, producer, sequence, o, "not dead-lettered"))
        ruling = Ruling(outcome, found_unsettled, unconfirmed, corrected)
        self.rulings[group] = ruling
        return ruling

    def story(self, group: str, producer: int, sequence: int, counted: str, broker: str) -> dict:
        """What dimster saw of one record, beside what the broker's dead-letter topic says of it."""
        key = (group, producer)

        def deliveries(by_delivery: dict[tuple[str, int], dict[int, RangeSet]]) -> list[int]:
            return sorted(d for d, s in by_delivery.get(key, {}).items() if sequence in s)

        return {
            "group": group,
            "producer": producer,
            "sequence": sequence,
            "counted": counted,
            "broker": broker,
            "rejected_on": deliveries(self.rejected_on),
            "received_again_on": deliveries(self.received_on),
            "in_doubt_on": deliveries(self.doubted_on),
            "archived": sequence in self.sets.get(("archived", group, producer), RangeSet()),
        }
