"""A share group's rejected and archived records by their last delivery (coordinator/account/share_outcomes.py):
a reject answered as settled, of a record received again later, did not take effect; a record whose
acknowledgement was answered with an error is in doubt unless it comes back; with a dead-letter queue,
the topic's word decides."""

import random

import pytest

from dimster.coordinator.account.share_outcomes import ShareOutcomes
from dimster.metrics.sequences import RangeSet
from dimster.worker.protocol import ClientInterval

pytestmark = pytest.mark.unit

GROUP, PRODUCER = "g", 3


def interval(client: str, rejected=None, archived=None, again=None, doubt=None) -> ClientInterval:
    """`rejected`, `again`, `doubt`: {delivery: [sequences]}; `archived`: [sequences]."""
    return ClientInterval(
        client,
        "share_consumer",
        "t",
        group=GROUP,
        settled_rejected={(PRODUCER, d): [(s, s) for s in seqs] for d, seqs in (rejected or {}).items()},
        settled_archived={PRODUCER: [(s, s) for s in archived or []]},
        received_again={(PRODUCER, d): [(s, s) for s in seqs] for d, seqs in (again or {}).items()},
        in_doubt={(PRODUCER, d): [(s, s) for s in seqs] for d, seqs in (doubt or {}).items()},
    )


@pytest.mark.parametrize("order", ["reject first", "redelivery first"])
def test_a_reject_of_a_record_another_consumer_received_again_is_void_in_either_report_order(order):
    a = interval("a", rejected={1: [10, 11]})  # 10 came back to b on delivery 2; 11 did not
    b = interval("b", again={2: [10]})
    outcomes = ShareOutcomes()
    for c in (a, b) if order == "reject first" else (b, a):
        outcomes.add(GROUP, 0, c)
    assert outcomes.count("rejected", GROUP) == 1
    assert outcomes.voided(GROUP) == {PRODUCER: {10}}
    assert [outcomes.holds("rejected", GROUP, PRODUCER, s) for s in (10, 11)] == [False, True]


def test_records_in_question_are_found_and_kept_by_range_not_one_by_one():
    """100,000 records rejected in one range; 5 of them, and a stretch of 3 that reaches one past the
    range, received again later: exactly those 7 are in question (kept as 2 ranges) and void, in
    either report order."""
    for order in ("reject first", "redelivery first"):
        rejected = ClientInterval("a", "share_consumer", "t", group=GROUP,
                                  settled_rejected={(PRODUCER, 1): [(0, 99_999)]})  # fmt: skip
        again = ClientInterval("b", "share_consumer", "t", group=GROUP,
                               received_again={(PRODUCER, 2): [(50_000, 50_004), (99_998, 100_000)]})  # fmt: skip
        outcomes = ShareOutcomes()
        for c in (rejected, again) if order == "reject first" else (again, rejected):
            outcomes.add(GROUP, 0, c)
        assert outcomes.in_question[(GROUP, PRODUCER)].ranges() == [(50_000, 50_004), (99_998, 99_999)], order
        assert outcomes.voided(GROUP) == {PRODUCER: {50_000, 50_001, 50_002, 50_003, 50_004, 99_998, 99_999}}
        assert outcomes.count("rejected", GROUP) == 100_000 - 7


def test_a_reject_on_a_later_delivery_stands_and_an_archived_record_counts_once_as_archived():
    """Record 20: rejected on 1 (void), received on 2, rejected on 2 (stands, limit 3). Record 21:
    rejected on 1 (void), archived on its last delivery, 3."""
    outcomes = ShareOutcomes()
    outcomes.add(GROUP, 0, interval("a", rejected={1: [20, 21]}))
    outcomes.add(GROUP, 0, interval("b", rejected={2: [20]}, again={2: [20, 21], 3: [21]}, archived=[21]))
    assert (outcomes.count("rejected", GROUP), outcomes.count("archived", GROUP)) == (1, 1)
    assert outcomes.holds("rejected", GROUP, PRODUCER, 20) and not outcomes.holds("rejected", GROUP, PRODUCER, 21)
    assert outcomes.holds("archived", GROUP, PRODUCER, 21)


def test_records_received_again_after_an_accept_or_a_release_change_nothing():
    outcomes = ShareOutcomes()
    outcomes.add(GROUP, 0, interval("a", rejected={2: [5]}, again={2: [5, 6, 7]}))
    assert (outcomes.count("rejected", GROUP), outcomes.voided(GROUP)) == (1, {})
    assert not outcomes.holds("rejected", GROUP, PRODUCER, 6) and not outcomes.holds("archived", "other", 1, 5)


def test_an_acknowledgement_answered_with_an_error_is_in_doubt_unless_the_record_comes_back():
    """30 and 31: their delivery 1 answered with an error; 30 came back on delivery 2 (so the first did
    not take effect), 31 did not. 32: in doubt on its delivery 2, after coming back once."""
    outcomes = ShareOutcomes()
    outcomes.add(GROUP, 0, interval("a", doubt={1: [30, 31]}))
    outcomes.add(GROUP, 0, interval("b", again={2: [30, 32]}, doubt={2: [32]}))
    assert outcomes.doubtful(GROUP)[PRODUCER].ranges() == [(31, 32)] and outcomes.doubtful_count(GROUP) == 2
    assert outcomes.doubtful("other") == {} and outcomes.doubtful_count("other") == 0


def test_records_in_doubt_are_found_by_range_as_one_by_one_on_random_input():
    """Acknowledgements answered with an error on random deliveries, records coming back on random
    later ones: the ranges in doubt hold exactly the records a record-by-record reading finds."""
    rng = random.Random(48)
    for _ in range(100):
        outcomes, doubted, again = ShareOutcomes(), {}, {}
        for _ in range(rng.randrange(1, 6)):
            delivery = rng.randrange(1, 5)
            doubt = {delivery: sorted(rng.sample(range(200), rng.randrange(0, 40)))}
            redelivered = [d for d in range(2, 6) if rng.random() < 0.5]
            received = {d: sorted(rng.sample(range(200), rng.randrange(0, 60))) for d in redelivered}
            outcomes.add(GROUP, 0, interval("c", doubt=doubt, again=received))
            for d, seqs in doubt.items():
                doubted.setdefault(d, set()).update(seqs)
            for d, seqs in received.items():
                again.setdefault(d, set()).update(seqs)
        expected = {s for d, seqs in doubted.items() for s in seqs if not any(s in again[e] for e in again if e > d)}
        found = outcomes.doubtful(GROUP).get(PRODUCER, RangeSet())
        assert set(found.values()) == expected and outcomes.doubtful_count(GROUP) == len(expected)


def test_the_dead_letter_topic_rules_each_record_and_tells_those_dimster_had_counted_otherwise():
    """The topic holds 40 (rejected, as dimster counted it), 41 (which dimster counted accepted: its
    reject was answered "settled" on a delivery after the lock ran out, and delivery 2 was accepted as
    far as dimster heard, yet the broker dead-lettered it), 42 (in doubt to dimster: its reject was
    answered with an error) and 43 (archived, which dimster never settled). 44, counted archived by
    dimster, is not there: in doubt."""
    outcomes = ShareOutcomes()
    outcomes.add(GROUP, 0, interval("a", rejected={1: [40, 41]}, doubt={1: [42]}))
    outcomes.add(GROUP, 0, interval("b", again={2: [41]}, archived=[44]))
    settled = RangeSet()
    for s in (40, 41, 44):
        settled.add(s, s)
    letters = {(PRODUCER, 40): "rejected", (PRODUCER, 41): "rejected", (PRODUCER, 42): "rejected",
               (PRODUCER, 43): "archived"}  # fmt: skip
    ruling = outcomes.rule(GROUP, letters, {PRODUCER: settled})
    assert (outcomes.count("rejected", GROUP), outcomes.count("archived", GROUP)) == (3, 1)
    assert outcomes.holds("rejected", GROUP, PRODUCER, 41) and not outcomes.holds("archived", GROUP, PRODUCER, 44)
    assert outcomes.doubtful_count(GROUP) == 1  # 42's doubt is ruled: rejected; 44 is not confirmed
    assert (ruling.found_unsettled, ruling.unconfirmed) == (2, {(PRODUCER, 44)})
    assert outcomes.settled_correction(GROUP) == 1  # 42 and 43 settled, 44 no longer
    stories = {story["sequence"]: story for story in ruling.corrected}
    assert sorted(stories) == [41, 42, 43, 44]
    assert stories[41] == {
        "group": GROUP, "producer": PRODUCER, "sequence": 41, "counted": "accepted", "broker": "rejected",
        "rejected_on": [1], "received_again_on": [2], "in_doubt_on": [], "archived": False,
    }  # fmt: skip
    assert (stories[42]["counted"], stories[42]["in_doubt_on"]) == ("not settled", [1])
    assert (stories[44]["counted"], stories[44]["broker"]) == ("archived", "not dead-lettered")
