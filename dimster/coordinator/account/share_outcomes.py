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
record dimster counted rejected or archived that is not there is in doubt.

Records long settled are folded into counts (outcome_folds.py): memory follows the records in play."""

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from dimster.coordinator.account.outcome_folds import Folding
from dimster.metrics.sequences import RangeSet, first_absent, gaps, ranges_size
from dimster.worker.accounts import Account, GroupAccount

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
        self.folding: Folding | None = None  # none until fold_beyond: every record kept
        self._start()

    def _start(self) -> None:
        self.sets: dict[tuple[str, str, int], RangeSet] = defaultdict(RangeSet)  # (outcome, group, producer)
        self.counts: dict[tuple[str, str], int] = defaultdict(int)  # (outcome, group): distinct records
        # (group, producer) -> delivery count -> its records rejected, received (from 2 on), in doubt
        self.rejected_on: dict[tuple[str, int], dict[int, RangeSet]] = defaultdict(dict)
        self.received_on: dict[tuple[str, int], dict[int, RangeSet]] = defaultdict(dict)
        self.doubted_on: dict[tuple[str, int], dict[int, RangeSet]] = defaultdict(dict)
        # (group, producer) -> records rejected on one delivery and received on a later one
        self.in_question: dict[tuple[str, int], RangeSet] = defaultdict(RangeSet)
        self.rulings: dict[str, Ruling] = {}  # group -> the dead-letter topic's word, once read
        # group -> records folded (outcome_folds.py) as void rejects, and as in doubt
        self.folded_voided: dict[str, int] = defaultdict(int)
        self.folded_doubtful: dict[str, int] = defaultdict(int)

    def fold_beyond(self, horizon_s: float, replay: Callable[[], Iterable[tuple[str, GroupAccount]]]) -> None:
        """Fold records whose outcome is final after `horizon_s` of consuming time (outcome_folds.py);
        `replay`: every group account taken in so far, for an end that needs every record."""
        self.folding = Folding(horizon_s, replay)

    def add(self, group: str, received: int, c: Account, end_time: float = 0.0, covered: float = 0.0) -> None:
        """A group's consumers (or one of them) received `received` records in an interval and settled `c`;
        `end_time`, `covered`: of the interval's report, for the group's clock (folding only)."""
        if self.folding is not None:
            self.folding.take(group, received, c, end_time, covered)
        for (producer_id, delivery), ranges in c.settled_rejected.items():
            self._add("rejected", group, producer_id, ranges)
            self._note(self.rejected_on, self.received_on, (group, producer_id), delivery, ranges, later=True)
        for producer_id, ranges in c.settled_archived.items():
            self._add("archived", group, producer_id, ranges)
        for (producer_id, delivery), ranges in c.received_again.items():
            self._note(self.received_on, self.rejected_on, (group, producer_id), delivery, ranges, later=False)
        for (producer_id, delivery), ranges in c.in_doubt.items():
            self._note(self.doubted_on, {}, (group, producer_id), delivery, ranges, later=False)

    def fold_due(self, kept: Callable[[str, int], list[RangeSet]]) -> None:
        """Fold, in each group whose clock ran a stretch, what is final: below the lowest record
        touched within the horizon and the first that is neither in `kept(group, producer)` (settled,
        failed) nor in doubt."""
        f = self.folding
        if f is None:
            return
        for group in [g for g in f.clock if f.due(g)]:
            keys = {k for by in (self.rejected_on, self.received_on, self.doubted_on) for k in by if k[0] == group}
            keys.update((g, p) for _, g, p in self.sets if g == group)
            for key in keys:
                below = f.folded_below.get(key, 0)
                open_sets = [*kept(*key), *self.doubted_on.get(key, {}).values()]
                mark = min(f.quiet_below(key), first_absent(below, open_sets))
                if mark > below:
                    self._fold(key, int(mark))
                    f.folded_below[key] = int(mark)

    def _fold(self, key: tuple[str, int], mark: int) -> None:
        """Count the void rejects and the records in doubt below `mark`, then drop every range there."""
        group, producer = key
        if (question := self.in_question.get(key)) is not None:
            below = (s for first, last in question.cut_below(mark) for s in range(first, last + 1))
            self.folded_voided[group] += sum(1 for s in below if self._void(key, s))
        self.folded_doubtful[group] += self._doubtful_of(key, mark).count()
        for outcome in OUTCOMES:
            if (ranges := self.sets.get((outcome, group, producer))) is not None:
                ranges.cut_below(mark)
        for by_delivery in (self.rejected_on, self.received_on, self.doubted_on):
            for delivery, ranges in list(by_delivery.get(key, {}).items()):
                ranges.cut_below(mark)
                if not ranges:
                    del by_delivery[key][delivery]

    def widen_horizon(self, horizon_s: float) -> None:
        """Fold only what has been quiet for `horizon_s` of consuming time, if that is longer."""
        if self.folding:
            self.folding.horizon_s = max(self.folding.horizon_s, horizon_s)

    @property
    def late(self) -> int:
        """Events of records already folded (each makes the end replay the run: restore)."""
        return self.folding.late if self.folding else 0

    def restore(self) -> None:
        """Every record of the run again, from its journal, and no folding from now on: for an end that
        needs them (a record that came back after it was folded, a dead-letter ruling)."""
        f, self.folding = self.folding, None
        if f is None or not f.folded_below:
            return
        self._start()
        for group, account in f.replay():
            self.add(group, account.received, account)

    def _add(self, outcome: str, group: str, producer_id: int, ranges: Ranges) -> None:
        duplicates = self.sets[(outcome, group, producer_id)].add_many(ranges)
        self.counts[(outcome, group)] += ranges_size(ranges) - duplicates

    def _note(self, mine, others, key: tuple[str, int], delivery: int, ranges: Ranges, later: bool) -> None:
        """Add `ranges` to `mine` at `delivery`; records also in `others` at a later delivery (`later`),
        or an earlier one, are in question."""
        by_delivery = mine[key]
        by_delivery.setdefault(delivery, RangeSet()).add_many(ranges)
        against = [s for d, s in others.get(key, {}).items() if (d > delivery if later else d < delivery)]
        for other in against:  # by range: what both hold
            if both := other.within_many(ranges):
                self.in_question[key].add_many(both)

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
        if outcome != "rejected":
            return n
        return n - self.folded_voided.get(group, 0) - sum(map(len, self.voided(group).values()))

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
        answered on their latest delivery (none came after), found by range (not those folded)."""
        return {producer: self._doubtful_of((g, producer)) for g, producer in self.doubted_on if g == group}

    def _doubtful_of(self, key: tuple[str, int], below: float = math.inf) -> RangeSet:
        found = RangeSet()
        received = self.received_on.get(key, {})
        for delivery, ranges in self.doubted_on.get(key, {}).items():
            later = [s for d, s in received.items() if d > delivery]
            for first, last in ranges.ranges():
                if first >= below:
                    break
                last = int(min(last, below - 1))
                for piece in gaps(first, last, [both for s in later for both in s.within(first, last)]):
                    found.add(*piece)
        return found

    def doubtful_count(self, group: str) -> int:
        """The group's records in doubt: those `doubtful` holds that the dead-letter topic did not rule
        on, and those it did not confirm."""
        found = self.doubtful(group)
        ruling = self.rulings.get(group)
        count = sum(ranges.count() for ranges in found.values())
        count += self.folded_doubtful.get(group, 0)
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
