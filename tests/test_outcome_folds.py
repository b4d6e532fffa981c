"""Long-settled share-group records folded into counts (coordinator/account/outcome_folds.py): the
account of a run whose outcomes fold is the account of one that keeps every record; what the coordinator
keeps stays with the records in play; a record that comes back after it was folded makes the end count
every record again from the run's own reports; a pause of the group's consumption holds the horizon."""

import json
import random

import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.end import close_account
from dimster.coordinator.account.intake import ReportIntake
from dimster.coordinator.account.journal import RunJournal
from dimster.coordinator.account.outcome_folds import MIN_HORIZON_S, horizon_for
from dimster.coordinator.control.run_log import RunLog
from dimster.metrics.sequences import RangeSet, first_absent, to_ranges
from dimster.results.bundle import ResultsBundle
from dimster.worker.accounts import GroupAccount
from dimster.worker.protocol import ClientInterval, worker_report
from dimster.workload.model import Workload
from dimster.workload.modes.base import SteadyPlan

pytestmark = pytest.mark.unit

GROUP, TOPIC, PRODUCER, PER_SECOND = "g", "t", 0, 200


class Run:
    """One producer, one share group, a report a second: a folding aggregate beside one that keeps
    every record, both fed the same reports; the consumer intervals kept as the journal would."""

    def __init__(self, folding: bool = True):
        self.a, self.whole = RunAggregate({GROUP: TOPIC}), RunAggregate({GROUP: TOPIC})
        self.journal: list[tuple[str, GroupAccount]] = []
        if folding:
            self.a.outcomes.fold_beyond(horizon_for(30_000), lambda: iter(list(self.journal)))
        for aggregate in (self.a, self.whole):
            aggregate.load_started = 1000.0
        self.second, self.sent = 0, 0

    def report(self, consumer: ClientInterval, produce: bool = True) -> None:
        self.second += 1
        n = PER_SECOND if produce else 0
        self.sent += n
        producer = ClientInterval("p0", "producer", TOPIC, sent=n, acked=n, next_sequence=self.sent)
        consumed = worker_report(1, 1000.0 + self.second, [consumer])
        self.journal.extend(consumed.groups.items())
        for aggregate in (self.a, self.whole):
            aggregate.add(worker_report(0, 1000.0 + self.second, [producer]))
            aggregate.add(consumed)

    def accounts(self) -> tuple[dict, dict]:
        return self.a.account({GROUP: 0})[GROUP], self.whole.account({GROUP: 0})[GROUP]


def consumer(**fields) -> ClientInterval:
    settled = fields.pop("settled", [])
    c = ClientInterval("c0", "share_consumer", TOPIC, group=GROUP, received=len(settled) or 1, **fields)
    c.settled = {PRODUCER: to_ranges(settled)} if settled else {}
    return c


def by_delivery(sequences: dict[int, list[int]]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    return {(PRODUCER, d): to_ranges(s) for d, s in sequences.items() if s}


def random_second(rng: random.Random, first: int, coming_back: dict[int, list[int]]) -> ClientInterval:
    """The consumer's second: the records sent the second before (5 % rejected, 2 % rejected after the
    lock ran out so they come back, 5 % released, 3 % answered with an error, half of which come back),
    and the records due back on delivery 2, accepted."""
    settled, rejected, doubt, again = [], [], [], coming_back.pop(first, [])
    back: list[int] = []
    for s in range(first, first + PER_SECOND):
        draw = rng.random()
        if draw < 0.05:
            rejected.append(s)
            settled.append(s)
        elif draw < 0.07:  # a void reject: heard settled, the lock had run out
            rejected.append(s)
            settled.append(s)
            back.append(s)
        elif draw < 0.12:  # released: comes back
            back.append(s)
        elif draw < 0.15:
            doubt.append(s)
            if draw < 0.135:
                back.append(s)
        else:
            settled.append(s)
    coming_back[first + PER_SECOND] = back
    return consumer(
        settled=settled + again,
        settled_rejected=by_delivery({1: rejected}),
        received_again=by_delivery({2: again}),
        in_doubt=by_delivery({1: doubt}),
    )


def ranges_kept(a: RunAggregate) -> int:
    o = a.outcomes
    by_delivery = [s for by in (o.rejected_on, o.received_on, o.doubted_on) for d in by.values() for s in d.values()]
    return sum(len(s) for s in [*o.sets.values(), *o.in_question.values(), *by_delivery])


def test_a_folding_account_is_the_account_of_every_record_and_keeps_only_the_records_in_play():
    rng, run, coming_back = random.Random(48), Run(), {}
    kept = []
    for second in range(400):
        run.report(random_second(rng, (second - 1) * PER_SECOND, coming_back) if second else consumer())
        kept.append(ranges_kept(run.a))
    folded, whole = run.accounts()
    assert folded == whole and whole["rejected"] > 0.04 * run.sent and whole["in_doubt"] > 0.01 * run.sent
    assert run.a.outcomes.late == 0 and run.a.outcomes.folding is not None  # nothing restored
    assert run.whole.outcomes.count("rejected", GROUP) == run.a.outcomes.count("rejected", GROUP)
    assert run.whole.outcomes.doubtful_count(GROUP) == run.a.outcomes.doubtful_count(GROUP)
    # kept: about the horizon's records, not the run's (the whole one holds them all)
    horizon_ranges = 0.15 * PER_SECOND * (MIN_HORIZON_S + 20) * 2
    assert max(kept[200:]) < horizon_ranges < ranges_kept(run.whole) / 2
    assert kept[-1] < 1.5 * kept[200]


def test_a_record_that_comes_back_after_it_was_folded_makes_the_end_count_every_record_again(tmp_path):
    """Record 5 rejected, heard settled; it comes back on delivery 2 two horizons later (a lock far
    longer than the group said): a late event, and the account replays the run's reports."""
    run = Run()
    run.report(consumer(settled=list(range(PER_SECOND)), settled_rejected=by_delivery({1: [5]})))
    for second in range(1, int(2 * MIN_HORIZON_S) + 20):
        first = second * PER_SECOND
        run.report(consumer(settled=list(range(first, first + PER_SECOND))))
    assert run.a.outcomes.folding.folded_below[(GROUP, PRODUCER)] > 5  # folded
    assert run.a.outcomes.count("rejected", GROUP) == 1
    run.report(consumer(received_again=by_delivery({2: [5]})), produce=False)
    assert run.a.outcomes.late == 1
    bundle = ResultsBundle(tmp_path, "w")
    end = close_account(run.a, {GROUP: 0}, SteadyPlan(), Workload(name="w"), RunLog(bundle, say=lambda _line: None))
    folded, whole = end.account[GROUP], run.whole.account({GROUP: 0})[GROUP]
    assert folded == whole and whole["rejected"] == 0  # void: its reject did not take effect
    assert run.a.outcomes.folding is None and run.a.outcomes.voided(GROUP) == {PRODUCER: {5}}
    replayed = [json.loads(line) for line in (bundle.path / "events.jsonl").read_text().splitlines()]
    assert [(e["event"], e["late"]) for e in replayed] == [("outcomes_replayed", 1)]  # the timeline says why


@pytest.mark.parametrize(
    ("change", "late"),
    [
        ({"groupConfig": {"share.record.lock.duration.ms": 300_000}}, 0),  # the group's lock: 5 minutes
        ({"brokerConfig": {"group.share.record.lock.duration.ms": 300_000}}, 0),  # the brokers' default
        ({"groupConfig": {"share.record.lock.duration.ms": 10_000}}, 1),  # shorter: the horizon stays
        ({"producerRate": 500}, 1),  # no lock named
    ],
)
def test_a_live_change_to_a_longer_lock_widens_the_horizon_before_records_fold(change, late):
    """Record 5 rejected on delivery 1 comes back after 130 s of consumption: within the horizon of a
    lock changed live to 5 minutes (not late, nothing replayed), past the start's 60 s otherwise."""
    run = Run()
    intake = ReportIntake(run.a, None, None, None, None)  # type: ignore[arg-type]  # follow() needs none of them
    intake.follow(Workload.model_validate({"name": "w", **change}), (0.0, 0), ())
    run.report(consumer(settled=list(range(PER_SECOND)), settled_rejected=by_delivery({1: [5]})))
    for second in range(1, 130):
        first = second * PER_SECOND
        run.report(consumer(settled=list(range(first, first + PER_SECOND))))
    run.report(consumer(received_again=by_delivery({2: [5]})), produce=False)
    assert run.a.outcomes.late == late
    folded, whole = run.accounts()
    assert folded == whole and whole["rejected"] == 0


def test_a_pause_in_the_groups_consumption_holds_the_horizon_back():
    """Record 5's acknowledgement answered with an error; the group's consumers take nothing in for ten
    minutes, then record 5 comes back: not late, and not in doubt."""
    run = Run()
    run.report(consumer(settled=[s for s in range(PER_SECOND) if s != 5], in_doubt=by_delivery({1: [5]})))
    for _ in range(600):
        pause = ClientInterval("c0", "share_consumer", TOPIC, group=GROUP)
        run.report(pause, produce=False)
    run.report(consumer(settled=[5], received_again=by_delivery({2: [5]})), produce=False)
    for second in range(1, 100):
        first = second * PER_SECOND
        run.report(consumer(settled=list(range(first, first + PER_SECOND))))
    assert run.a.outcomes.late == 0 and run.a.outcomes.folding.folded_below[(GROUP, PRODUCER)] > 5
    folded, whole = run.accounts()
    assert folded == whole and (whole["in_doubt"], whole["accepted"]) == (0, run.sent)


def test_a_restore_brings_every_folded_record_back_for_a_dead_letter_ruling():
    run = Run()
    rejected = [3, 77, 150]
    run.report(consumer(settled=list(range(PER_SECOND)), settled_rejected=by_delivery({1: rejected})))
    for second in range(1, int(MIN_HORIZON_S) + 30):
        first = second * PER_SECOND
        run.report(consumer(settled=list(range(first, first + PER_SECOND))))
    outcomes = run.a.outcomes
    assert not any(outcomes.holds("rejected", GROUP, PRODUCER, s) for s in rejected)  # folded
    outcomes.restore()
    assert all(outcomes.holds("rejected", GROUP, PRODUCER, s) for s in rejected)
    assert outcomes.count("rejected", GROUP) == 3 and outcomes.folding is None


def test_ranges_cut_below_a_mark_and_the_first_value_no_set_holds():
    ranges = RangeSet()
    for first, last in ((0, 9), (20, 29), (40, 49)):
        ranges.add(first, last)
    assert ranges.cut_below(25) == [(0, 9), (20, 24)] and ranges.ranges() == [(25, 29), (40, 49)]
    assert ranges.cut_below(25) == [] and ranges.cut_below(100) == [(25, 29), (40, 49)] and ranges.ranges() == []
    settled, failed = RangeSet(), RangeSet()
    settled.add(0, 9)
    settled.add(12, 19)
    failed.add(10, 11)
    assert first_absent(0, [settled, failed]) == 20 and first_absent(0, [settled]) == 10
    assert first_absent(30, [settled, failed]) == 30


def test_the_journal_replays_the_group_accounts_in_the_order_taken_in(tmp_path):
    """What restore replays on a run: the reports' group accounts of journal.msgpack, ranges and all."""
    journal = RunJournal(tmp_path)
    journal.start([TOPIC], 1, {})
    producer = ClientInterval("p0", "producer", TOPIC, sent=3, acked=3, next_sequence=3)
    first = consumer(settled=[0, 1], settled_rejected=by_delivery({1: [1]}))
    second = consumer(settled=[2], received_again=by_delivery({2: [1]}))
    for end, c in ((1.0, first), (2.0, second)):
        journal.report(worker_report(0, end, [producer, c]), None, 0)
    replayed = list(journal.group_accounts())
    journal.close()
    assert [(g, c.settled, c.settled_rejected, c.received_again) for g, c in replayed] == [
        (GROUP, {PRODUCER: [(0, 1)]}, {(PRODUCER, 1): [(1, 1)]}, {}),
        (GROUP, {PRODUCER: [(2, 2)]}, {}, {(PRODUCER, 2): [(1, 1)]}),
    ]
