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
