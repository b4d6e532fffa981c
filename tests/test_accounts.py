"""A report's consumers' ranges merged per group (protocol 19, dimster/worker/accounts.py): the union
of their ranges once, the records two of them settled counted as duplicates, and the run's account the
same as if each consumer's ranges had been added on their own."""

import random

import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.metrics.sequences import RangeSet
from dimster.worker.accounts import GroupAccount, union
from dimster.worker.client_columns import take_accounts
from dimster.worker.protocol import ClientInterval, Reported, decode, encode, worker_report
from dimster.worker.wire import Ranges

pytestmark = pytest.mark.unit


def test_a_union_merges_what_touches_and_counts_what_overlaps():
    assert union([[(0, 4)], [(5, 9)]]) == ([(0, 9)], 0)  # touching: one range, nothing twice
    assert union([[(0, 9)], [(2, 3)], [(20, 21)]]) == ([(0, 9), (20, 21)], 2)
    assert union([[(0, 4), (8, 8)], [(3, 8)]]) == ([(0, 8)], 3)  # 3, 4 and 8 twice
    one = Ranges([(7, 7), (1, 2)])
    assert union([one]) == (one, 0)  # a single list as it is, not copied


def test_a_groups_consumers_merge_into_one_account_and_keep_their_own_rows():
    producer = ClientInterval("p0", "producer", "t", sent=10, acked=10, next_sequence=10, failed_sequences=[3])
    first = ClientInterval(
        "c0", "share_consumer", "t", "g", received=6, settled={0: [(0, 4)], 1: [(0, 0)]},
        settled_rejected={(0, 1): [(4, 4)]}, delivery_counts={1: 6},
    )  # fmt: skip
    second = ClientInterval(
        "c1", "share_consumer", "t", "g", received=7, settled={0: [(3, 9)]}, in_doubt={(1, 2): [(5, 5)]}
    )
    idle = ClientInterval("c2", "share_consumer", "u", "h")
    accounts, carried = take_accounts([producer, first, second, idle])
    assert accounts == {
        "g": GroupAccount(
            settled={0: [(0, 9)], 1: [(0, 0)]}, settled_rejected={(0, 1): [(4, 4)]}, in_doubt={(1, 2): [(5, 5)]},
            received=13, duplicates=2,  # records 3 and 4 of producer 0 settled by both
        ),
        "h": GroupAccount(),  # an idle group has one too: its clock's end moves
    }  # fmt: skip
    assert carried[0] is producer and carried[3] is idle  # nothing to take from them
    assert [c.settled for c in carried[1:3]] == [{}, {}] and carried[1].delivery_counts == {1: 6}
    assert first.settled == {0: [(0, 4)], 1: [(0, 0)]} and second.in_doubt  # the intervals given are not changed
    report = decode(encode(Reported(worker_report(0, 1.0, [producer, first, second, idle])))).report
    assert report.groups == accounts and [c.client_id for c in report.clients] == ["p0", "c0", "c1", "c2"]
    assert report.clients[0].failed_sequences == [3] and report.clients[1].delivery_counts == {1: 6}


def _ranges(values: set[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for value in sorted(values):
        if ranges and ranges[-1][1] == value - 1:
            ranges[-1] = (ranges[-1][0], value)
        else:
            ranges.append((value, value))
    return ranges


def test_the_runs_settled_records_and_duplicates_are_those_of_each_consumers_ranges_added_alone():
    """Reports of three consumers of one group settling overlapping records of two producers (a record
    settled twice in one report, or again in a later one): the aggregate, fed the merged reports, counts
    what a set fed each consumer's ranges alone counts."""
    rng = random.Random(48)
    aggregate = RunAggregate({"g": "t"})
    settled: dict[int, RangeSet] = {0: RangeSet(), 1: RangeSet()}
    distinct = duplicates = 0
    for second in range(40):
        consumers = []
        for c in range(3):
            by_producer = {p: _ranges({rng.randrange(400) for _ in range(rng.randrange(12))}) for p in (0, 1)}
            by_producer = {p: Ranges(r) for p, r in by_producer.items() if r}
            received = sum(last - first + 1 for ranges in by_producer.values() for first, last in ranges)
            consumers.append(
                ClientInterval(f"c{c}", "share_consumer", "t", "g", received=received, settled=by_producer)
            )
            for producer, ranges in by_producer.items():
                twice = settled[producer].add_many(ranges)
                duplicates += twice
                distinct += sum(last - first + 1 for first, last in ranges) - twice
        aggregate.add(worker_report(1, 1000.0 + second, consumers))
    assert duplicates > 0 and distinct > 0  # the draw has both, else the test could not fail
    assert (aggregate.duplicates, aggregate.settled_by_group["g"]) == (duplicates, distinct)
    assert {p: aggregate.settled[("g", p)].ranges() for p in (0, 1)} == {p: s.ranges() for p, s in settled.items()}


def _second(aggregate: RunAggregate, at: float, acked_to: int, settled: dict[str, tuple[int, int]]) -> None:
    """One second's reports: worker 0's producer p0 has acknowledged sequences 0..acked_to-1 (100 more each
    second); consumers (c0 on worker 1, c2 on worker 0) settled the given ranges of them."""
    producer = ClientInterval("p0", "producer", "t", sent=100, acked=100, next_sequence=acked_to)
    on_0 = [producer] + [
        ClientInterval(c, "share_consumer", "t", "g", received=last - first + 1, settled={0: Ranges([(first, last)])})
        for c, (first, last) in settled.items() if c == "c2"
    ]  # fmt: skip
    aggregate.add(worker_report(0, at, on_0))
    if "c0" in settled:
        first, last = settled["c0"]
        consumer = ClientInterval("c0", "share_consumer", "t", "g", received=last - first + 1)
        consumer.settled = {0: Ranges([(first, last)])}
        aggregate.add(worker_report(1, at, [consumer]))


def test_a_lost_consumers_unreported_burst_is_in_doubt_however_slow_its_last_report_was():
    """c0 settles every record for 3 s, then a slow second (10 records), then 290 in a burst, and its
    worker dies before reporting them. A bound of its last receive rate (10/s) times the time since its
    last report held 35 of them and called 255 lost that it had acknowledged; the bound by counting
    holds them all."""
    a = RunAggregate({"g": "t"})
    for second in range(3):
        _second(a, 1000.0 + second, 100 * (second + 1), {"c0": (100 * second, 100 * second + 99)})
    _second(a, 1003.0, 400, {"c0": (300, 309)})
    _second(a, 1004.0, 500, {})
    _second(a, 1005.0, 600, {})
    a.clients_lost(["c0"], stopped_by=1005.5, worker=1)  # it had settled 310..599, unreported
    for second in range(6, 9):  # c2 on worker 0 goes on with what comes after
        _second(a, 1000.0 + second, 100 * (second + 1), {"c2": (100 * second, 100 * second + 99)})
    terms = a.account({"g": 0})["g"]
    assert (terms["accepted"], terms["in_doubt"], terms["lost"], terms["closes"]) == (310 + 300, 290, 0, True)
    # the tail ended once worker 0's reports passed its end: what came after cannot be c0's
    assert not a.tails.open and [(t.settled_then, t.below) for t in a.tails.tails] == [(310, {0: 700})]


def test_records_sent_after_a_lost_worker_had_stopped_are_not_in_its_doubt():
    """The bound is not a blank cheque: 5 records sent after c0's worker had surely stopped, and settled
    by no one, are lost, though c0's tail could have held 150 records by count."""
    a = RunAggregate({"g": "t"})
    _second(a, 1000.0, 100, {"c0": (0, 49)})
    a.clients_lost(["c0"], stopped_by=1001.5, worker=1)
    _second(a, 1002.0, 200, {"c2": (50, 199)})  # c0 settled nothing unreported: c2 settles the rest
    _second(a, 1003.0, 300, {"c2": (200, 294)})  # 295..299 never settled
    _second(a, 1004.0, 400, {"c2": (300, 399)})
    assert [(t.settled_then, t.below) for t in a.tails.tails] == [(50, {0: 200})]
    terms = a.account({"g": 0})["g"]
    assert (terms["in_doubt"], terms["lost"], terms["closes"]) == (0, 5, True)


def test_a_lost_consumers_tail_holds_records_whose_acknowledgement_reached_the_coordinator_late():
    """The producer's reports trail its acknowledgements by 50 records (a busy host): c0 settled 60
    unreported before its worker was lost, 10 of them acknowledged only in a later report. The bound
    counts what is acknowledged by the time the account is taken, not when the tail ended."""
    a = RunAggregate({"g": "t"})
    _second(a, 1000.0, 100, {"c0": (0, 99)})
    a.clients_lost(["c0"], stopped_by=1000.5, worker=1)  # it had settled 100..159, unreported
    producer = ClientInterval("p0", "producer", "t", sent=50, acked=50, next_sequence=200)
    a.add(worker_report(0, 1001.0, [producer]))  # the tail ends here: 150 acknowledged, 200 sent
    producer = ClientInterval("p0", "producer", "t", sent=0, acked=50, next_sequence=200)
    a.add(worker_report(0, 1002.0, [producer, ClientInterval("c2", "share_consumer", "t", "g", received=0)]))
    c2 = ClientInterval("c2", "share_consumer", "t", "g", received=40, settled={0: Ranges([(160, 199)])})
    a.add(worker_report(0, 1003.0, [c2]))
    terms = a.account({"g": 0})["g"]
    assert (terms["acked"], terms["in_doubt"], terms["lost"], terms["closes"]) == (200, 60, 0, True)


def test_workers_lost_together_leave_one_tail_per_group_and_hide_no_loss_behind_a_doubt_counted_twice():
    """c0 (worker 1) and c1 (worker 2) are given up at the same moment, last heard when the group had
    settled 60 and 100 records; records 100..199 were acknowledged by then, which they may have settled
    unreported (the one tail starts at the earlier, 60, and ends below the producer's 300).
    Records 350..399, sent after they had surely stopped and settled by no one, are lost. A tail per
    worker counted the 100 in doubt once each: 200 in doubt, capped at the 150 missing, lost 0."""
    a = RunAggregate({"g": "t"})
    _second(a, 1000.0, 100, {"c0": (0, 59)})
    c1 = ClientInterval("c1", "share_consumer", "t", "g", received=40, settled={0: Ranges([(60, 99)])})
    a.add(worker_report(2, 1000.0, [c1]))
    _second(a, 1001.0, 200, {})
    for worker, consumer in ((1, "c0"), (2, "c1")):
        a.clients_lost([consumer], stopped_by=1001.5, worker=worker)
    _second(a, 1002.0, 300, {"c2": (200, 299)})
    _second(a, 1003.0, 400, {"c2": (300, 349)})
    assert [(t.settled_then, t.below) for t in a.tails.tails] == [(60, {0: 300})]
    terms = a.account({"g": 0})["g"]
    assert (terms["accepted"], terms["in_doubt"], terms["lost"], terms["closes"]) == (250, 100, 50, True)


def test_a_consumer_lost_before_its_first_report_may_have_settled_any_record_of_its_group():
    a = RunAggregate({"g": "t"})
    _second(a, 1000.0, 100, {})
    a.clients_lost(["c0"], stopped_by=1000.5, worker=1, groups={"c0": "g"})  # settled 0..99, never reported
    _second(a, 1001.0, 200, {"c2": (100, 199)})
    terms = a.account({"g": 0})["g"]
    assert (terms["in_doubt"], terms["lost"], terms["closes"]) == (100, 0, True)
