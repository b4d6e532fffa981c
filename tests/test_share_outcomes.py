"""A share group's rejected and archived records by their last delivery (coordinator/share_outcomes.py):
a reject answered as settled, of a record received again later, did not take effect."""

import pytest

from dimster.coordinator.share_outcomes import ShareOutcomes
from dimster.worker.protocol import ClientInterval

pytestmark = pytest.mark.unit

GROUP, PRODUCER = "g", 3


def interval(client: str, rejected=None, archived=None, again=None) -> ClientInterval:
    """`rejected`, `again`: {delivery: [sequences]}; `archived`: [sequences]."""
    return ClientInterval(
        client,
        "share_consumer",
        "t",
        group=GROUP,
        settled_rejected={(PRODUCER, d): [(s, s) for s in seqs] for d, seqs in (rejected or {}).items()},
        settled_archived={PRODUCER: [(s, s) for s in archived or []]},
        received_again={(PRODUCER, d): [(s, s) for s in seqs] for d, seqs in (again or {}).items()},
    )


@pytest.mark.parametrize("order", ["reject first", "redelivery first"])
def test_a_reject_of_a_record_another_consumer_received_again_is_void_in_either_report_order(order):
    a = interval("a", rejected={1: [10, 11]})  # 10 came back to b on delivery 2; 11 did not
    b = interval("b", again={2: [10]})
    outcomes = ShareOutcomes()
    for c in (a, b) if order == "reject first" else (b, a):
        outcomes.add(c)
    assert outcomes.count("rejected", GROUP) == 1
    assert outcomes.voided(GROUP) == {PRODUCER: {10}}
    assert [outcomes.holds("rejected", GROUP, PRODUCER, s) for s in (10, 11)] == [False, True]


def test_a_reject_on_a_later_delivery_stands_and_an_archived_record_counts_once_as_archived():
    """Record 20: rejected on 1 (void), received on 2, rejected on 2 (stands, limit 3). Record 21:
    rejected on 1 (void), archived on its last delivery, 3."""
    outcomes = ShareOutcomes()
    outcomes.add(interval("a", rejected={1: [20, 21]}))
    outcomes.add(interval("b", rejected={2: [20]}, again={2: [20, 21], 3: [21]}, archived=[21]))
    assert (outcomes.count("rejected", GROUP), outcomes.count("archived", GROUP)) == (1, 1)
    assert outcomes.holds("rejected", GROUP, PRODUCER, 20) and not outcomes.holds("rejected", GROUP, PRODUCER, 21)
    assert outcomes.holds("archived", GROUP, PRODUCER, 21)


def test_records_received_again_after_an_accept_or_a_release_change_nothing():
    outcomes = ShareOutcomes()
    outcomes.add(interval("a", rejected={2: [5]}, again={2: [5, 6, 7]}))
    assert (outcomes.count("rejected", GROUP), outcomes.voided(GROUP)) == (1, {})
    assert not outcomes.holds("rejected", GROUP, PRODUCER, 6) and not outcomes.holds("archived", "other", 1, 5)
