"""A share-group record is settled when the broker says so: the consumer's real loop, driven by an
in-memory Kafka client that answers every acknowledgement at the next poll (or at close), as both
libraries' acknowledgement-commit callbacks do, and the coordinator's account of what it reports.
No broker: what the libraries really answer is checked on the real one in test_share_features.py."""

import time

import numpy as np
import pytest

from dimster.clients import ACCEPT, LOCK_LAPSED, REFUSED, REJECT, RELEASE, SETTLED, Answers, Halted, Polled, record_keys
from dimster.coordinator.account.aggregate import RunAggregate
from dimster.metrics.histogram import Histogram
from dimster.worker.clients import ConsumerClient
from dimster.worker.clients import consumer as consumer_module
from dimster.worker.protocol import ClientInterval, ConsumerSpec, worker_report
from dimster.workload.model import Workload
from dimster.workload.payload import pack_header

pytestmark = pytest.mark.unit

PRODUCER = 7


def poll_of(*records: tuple[int, int, int]) -> Polled:
    """Records of PRODUCER as (sequence, offset, delivery count), all on partition 0."""
    return Polled(
        partitions=np.zeros(len(records), dtype=np.int32),
        delivery_counts=np.array([d for _, _, d in records], dtype=np.int32),
        headers=b"".join(pack_header(PRODUCER, s, time.time_ns()) for s, _, _ in records),
        value_bytes=100 * len(records),
        offsets=np.array([o for _, o, _ in records], dtype=np.int64),
    )


class InMemoryShareClient:
    """A share consumer's Kafka client: hands out `polls` one per poll and answers the acknowledgement
    of each poll's records with the next poll or the close: LOCK_LAPSED, once, for the offsets in
    `lapse`, else SETTLED. Tells the load client to stop when the polls run out."""

    def __init__(self, client: ConsumerClient, polls: list[Polled], lapse: set[int] = frozenset()):
        self.client, self.polls, self.lapse = client, list(polls), set(lapse)
        self.sent: Polled | None = None  # the last poll: acknowledged with the next poll or the close
        self.answers = Answers.none()
        self.closed = False
        self.ahead: list[bool] = []  # what the consumer said before each poll (fetch_ahead)

    def subscribe(self, topic: str) -> None:
        pass

    def lock_timeout_ms(self) -> float | None:
        return None

    def acknowledge(self, outcomes: np.ndarray) -> None:
        assert self.sent is not None and len(outcomes) == self.sent.count

    def _commit(self) -> None:
        if self.sent is None:
            return
        offsets = self.sent.offsets.tolist()
        status = [LOCK_LAPSED if offset in self.lapse else SETTLED for offset in offsets]
        self.lapse.difference_update(offsets)
        self.answers = Answers(record_keys(self.sent), np.array(status, dtype=np.int8))
        self.sent = None

    def poll(self, timeout: float) -> Polled | None:
        self._commit()
        if not self.polls:
            self.client.stopping.set()
            return None
        self.sent = self.polls.pop(0)
        return self.sent

    def take_answers(self) -> Answers:
        answers, self.answers = self.answers, Answers.none()
        return answers

    def fetch_ahead(self, on: bool) -> None:
        self.ahead.append(on)

    def halt(self) -> Halted:
        return Halted()

    def close(self) -> None:
        self._commit()
        self.closed = True


def share_client(**keys) -> ConsumerClient:
    """A share consumer of a workload with `keys`, measuring from the start."""
    workload = Workload.model_validate({"name": "w", "consumerType": "SHARE_GROUP", **keys})
    client = ConsumerClient(ConsumerSpec(0, "t", "g", "SHARE_GROUP"), workload, "127.0.0.1:1", delivery_count_limit=5)
    client.measure_from = 0.0
    return client


def consume(monkeypatch, client: ConsumerClient, driver, outcomes: list[list[int]] | None = None) -> ClientInterval:
    """The consumer's loop over its driver's polls to its close, a crashed client's too (`outcomes`:
    explicit mode, per poll): its interval."""
    monkeypatch.setattr(consumer_module, "consumer_driver", lambda *args: driver)
    chosen = iter(outcomes or [])
    monkeypatch.setattr(client, "_outcomes", lambda count: np.array(next(chosen), dtype=np.int8))
    client._consume_until_recreated()
    for burial, _ in client.burials:
        burial.join(120)  # a thread of the niced unit tier may wait seconds for a CPU
    return client.take_interval()[0]


def run(monkeypatch, polls: list[Polled], outcomes: list[list[int]] | None = None, lapse=frozenset(), **keys):
    """The consumer's loop over `polls` to its close (`outcomes`: explicit mode, per poll): its interval."""
    mode = "EXPLICIT" if outcomes is not None else "IMPLICIT"
    client = share_client(**{"acknowledgement": {"mode": mode}, **keys})
    driver = InMemoryShareClient(client, polls, lapse)
    interval = consume(monkeypatch, client, driver, outcomes)
    assert driver.closed
    return interval


def account(interval: ClientInterval, acked: int) -> tuple[dict, int]:
    """The coordinator's account of the group after this interval (the producer acknowledged `acked`
    records, sequences 0 on) and its count of duplicates."""
    aggregate = RunAggregate({"g": "t"})
    producer = ClientInterval(f"p{PRODUCER}", "producer", "t", next_sequence=acked, acked=acked, sent=acked)
    aggregate.add(worker_report(0, time.time(), [producer, interval]))
    return aggregate.account({"g": 0})["g"], aggregate.duplicates


def test_a_received_record_is_not_settled_until_the_broker_answers():
    client = share_client()
    poll = poll_of((0, 10, 1), (1, 11, 1))
    client._record(poll, None)
    received, histograms = client.take_interval()
    assert received.received == 2 and received.accepted == 0 and received.settled == {}
    assert Histogram.from_wire(histograms[("e2e", 0)]).total == 2  # latency: of delivery, at receipt
    client._answered(Answers(record_keys(poll), np.array([SETTLED, SETTLED], dtype=np.int8)))
    answered, _ = client.take_interval()
    assert answered.accepted == 2 and answered.settled == {PRODUCER: [(0, 1)]} and answered.received == 0


def test_success_settles(monkeypatch):
    interval = run(monkeypatch, [poll_of((0, 0, 1), (1, 1, 1)), poll_of((2, 2, 1))])
    assert (interval.received, interval.accepted, interval.lock_timeouts) == (3, 3, 0)
    assert interval.settled == {PRODUCER: [(0, 2)]}  # the last poll's with the close
    terms, duplicates = account(interval, 3)
    assert terms["accepted"] == 3 and terms["lost"] == 0 and terms["closes"] and duplicates == 0


def test_a_refused_acknowledgement_does_not_settle_and_the_redelivery_is_no_duplicate(monkeypatch):
    """Sequence 1's lock ran out before its acknowledgement: refused, it comes back (delivery 2) and
    is settled then, once."""
    polls = [poll_of((0, 0, 1), (1, 1, 1)), poll_of((1, 1, 2), (2, 2, 1))]
    interval = run(monkeypatch, polls, lapse={1})
    assert (interval.received, interval.accepted, interval.lock_timeouts) == (4, 3, 1)
    assert interval.settled == {PRODUCER: [(0, 2)]}
    terms, duplicates = account(interval, 3)
    assert duplicates == 0 and terms["accepted"] == 3 and terms["closes"]


def test_a_record_released_on_its_last_delivery_is_archived(monkeypatch):
    """Released on delivery 1 of 2 it comes back; released on delivery 2, the broker archives it."""
    polls = [poll_of((0, 0, 1)), poll_of((0, 0, 2))]
    interval = run(monkeypatch, polls, [[RELEASE], [RELEASE]], groupConfig={"share.delivery.count.limit": 2})
    assert (interval.released, interval.accepted) == (2, 0)
    assert interval.settled == interval.settled_archived == {PRODUCER: [(0, 0)]}
    terms, duplicates = account(interval, 1)
    assert (terms["archived"], terms["accepted"], duplicates) == (1, 0, 0) and terms["closes"]


def test_explicit_outcomes_count_when_their_acknowledgement_took_effect(monkeypatch):
    """Accepted, rejected and released count once the broker answers; one refused counts as refused."""
    polls = [poll_of((0, 0, 1), (1, 1, 1), (2, 2, 1), (3, 3, 1)), poll_of((2, 2, 2), (3, 3, 2))]
    interval = run(monkeypatch, polls, [[ACCEPT, REJECT, RELEASE, ACCEPT], [ACCEPT, ACCEPT]], lapse={3})
    assert (interval.accepted, interval.rejected, interval.released, interval.lock_timeouts) == (3, 1, 1, 1)
    assert interval.settled == {PRODUCER: [(0, 3)]} and interval.settled_rejected == {(PRODUCER, 1): [(1, 1)]}
    terms, duplicates = account(interval, 4)
    assert (terms["accepted"], terms["rejected"], duplicates) == (3, 1, 0) and terms["closes"]


def test_a_reject_answered_as_settled_after_its_lock_ran_out_is_void_when_the_record_comes_back(monkeypatch):
    """The Java client may answer "settled" for a record whose lock had run out: its delivery 1 was
    answered rejected, yet delivery 2 came and was accepted. It counts as accepted, once, with one
    duplicate; the reject on delivery 2 of record 1 stands (no later delivery)."""
    polls = [poll_of((0, 0, 1), (1, 1, 1)), poll_of((0, 0, 2)), poll_of((1, 1, 2))]
    interval = run(monkeypatch, polls, [[REJECT, ACCEPT], [ACCEPT], [REJECT]])
    assert interval.settled_rejected == {(PRODUCER, 1): [(0, 0)], (PRODUCER, 2): [(1, 1)]}
    assert interval.received_again == {(PRODUCER, 2): [(0, 1)]}
    terms, duplicates = account(interval, 2)
    assert (terms["accepted"], terms["rejected"], duplicates) == (1, 1, 2) and terms["closes"], terms


def test_acknowledgements_left_unanswered_at_close_are_errors_and_their_records_in_doubt(monkeypatch):
    """The broker went away: whether they took effect is unknown. Counted neither accepted (an outcome
    they may not have had) nor lost (a loss that may never have happened): in doubt, by name."""

    class Silent(InMemoryShareClient):
        def _commit(self) -> None:  # the acknowledgements never reach the broker (it went away)
            self.sent = None

    client = share_client()
    interval = consume(monkeypatch, client, Silent(client, [poll_of((0, 0, 1), (1, 1, 1))]))
    assert (interval.received, interval.accepted, interval.ack_errors) == (2, 0, 2)
    assert interval.settled == {} and interval.in_doubt == {(PRODUCER, 1): [(0, 1)]}
    terms, duplicates = account(interval, 2)
    assert (terms["accepted"], terms["in_doubt"], terms["lost"], duplicates) == (0, 2, 0, 0) and terms["closes"]


def test_a_record_whose_acknowledgement_was_answered_with_an_error_settles_by_its_next_delivery(monkeypatch):
    """Sequence 1's accept was answered with an error (a leader moving): in doubt, until delivery 2
    comes and is accepted: its first acknowledgement did not take effect. Accepted once, no duplicate."""

    class Refusing(InMemoryShareClient):
        def _commit(self) -> None:
            sent = self.sent
            super()._commit()
            if sent is not None and 1 in sent.offsets.tolist() and sent.delivery_counts[-1] == 1:
                self.answers.status[sent.offsets.tolist().index(1)] = REFUSED

    client = share_client()
    interval = consume(monkeypatch, client, Refusing(client, [poll_of((0, 0, 1), (1, 1, 1)), poll_of((1, 1, 2))]))
    assert (interval.accepted, interval.ack_errors, interval.in_doubt) == (2, 1, {(PRODUCER, 1): [(1, 1)]})
    assert interval.received_again == {(PRODUCER, 2): [(1, 1)]} and interval.settled == {PRODUCER: [(0, 1)]}
    terms, duplicates = account(interval, 2)
    assert (terms["accepted"], terms["in_doubt"], duplicates) == (2, 0, 0) and terms["closes"], terms


class FetchingAhead(InMemoryShareClient):
    """As a Java share consumer that fetches ahead: when the consumer leaves its loop, its fetching
    thread holds `unseen`, fetched after the last poll was handed over, and that fetch accepted the last
    poll (answered at the halt). Answers pile up until taken."""

    def __init__(self, client: ConsumerClient, polls: list[Polled], unseen: Polled, crash_at_end: bool):
        super().__init__(client, polls, lapse=set(unseen.offsets.tolist()) if crash_at_end else frozenset())
        self.unseen, self.crash_at_end = unseen, crash_at_end

    def lock_timeout_ms(self) -> float | None:
        return 0.0  # the least the consumer assumes (0.2 s): a crashed client closes soon after

    def _commit(self) -> None:
        taken = self.answers
        super()._commit()
        keys, status = (taken.keys, self.answers.keys), (taken.status, self.answers.status)
        self.answers = Answers(np.concatenate(keys), np.concatenate(status))

    def poll(self, timeout: float) -> Polled | None:
        polled = super().poll(timeout)
        if polled is not None and not self.polls and self.crash_at_end:
            self.client.crash()  # mid-processing of the last poll
        return polled

    def halt(self) -> Halted:
        self._commit()  # the fetch of `unseen` accepted the last poll
        self.sent = self.unseen  # held: acknowledged by the close (lock lapsed, after a crash)
        return Halted(self.unseen, last_accepted=True)


def fetching_ahead(monkeypatch, crash: bool) -> tuple[ClientInterval, FetchingAhead]:
    """Polls of sequences 0-1 and 2, then 3-4 fetched ahead and never handed over."""
    client = share_client()
    polls, unseen = [poll_of((0, 0, 1), (1, 1, 1)), poll_of((2, 2, 1))], poll_of((3, 3, 1), (4, 4, 1))
    driver = FetchingAhead(client, polls, unseen, crash_at_end=crash)
    monkeypatch.setattr(consumer_module, "CLOSE_AFTER_LOCK_S", 0.0)
    return consume(monkeypatch, client, driver), driver


def test_a_batch_fetched_ahead_and_never_handed_over_is_the_last_poll_at_a_close(monkeypatch):
    """Implicit mode, no processing: the consumer fetches ahead before every poll; the batch its client
    fetched while it left its loop is received and settled by the close like any last poll."""
    interval, driver = fetching_ahead(monkeypatch, crash=False)
    assert driver.ahead == [True, True, True] and driver.closed  # the third poll found none
    assert (interval.received, interval.accepted, interval.ack_errors) == (5, 5, 0)
    assert interval.settled == {PRODUCER: [(0, 4)]} and interval.crash_held == {}
    terms, duplicates = account(interval, 5)
    assert (terms["accepted"], terms["lost"], duplicates) == (5, 0, 0) and terms["closes"], terms


def test_a_crash_while_fetching_ahead_holds_the_batch_fetched_not_the_last_poll(monkeypatch):
    """The fetch after the last poll accepted it: the crash holds the batch fetched since (back after
    its locks run out, to another consumer), and the last poll settles by the answer to its acceptance,
    taken in when the crashed client closes."""
    interval, driver = fetching_ahead(monkeypatch, crash=True)
    assert driver.closed and interval.crashed_at
    assert (interval.received, interval.accepted, interval.ack_errors, interval.lock_timeouts) == (3, 3, 0, 0)
    assert interval.settled == {PRODUCER: [(0, 2)]} and interval.crash_held == {PRODUCER: [(3, 4)]}


class ProcessingFromTheThirdPoll(InMemoryShareClient):
    def poll(self, timeout: float) -> Polled | None:
        polled = super().poll(timeout)
        if len(self.polls) == 1:
            self.client.workload.consumer_proc_ms_max = 1  # a --modify between the 2nd and 3rd poll
        return polled


@pytest.mark.parametrize(
    ("mode", "fetched_ahead"), [("IMPLICIT", [True, True, False, False]), ("EXPLICIT", [False] * 4)]
)
def test_a_share_consumer_fetches_ahead_only_while_nothing_waits_between_a_poll_and_its_acknowledgement(
    monkeypatch, mode, fetched_ahead
):
    """Processing time set live after the second poll: the third is not fetched ahead (the fourth finds
    none). Explicit mode (renewals need it) never is."""
    client = share_client(acknowledgement={"mode": mode})
    driver = ProcessingFromTheThirdPoll(client, [poll_of((0, 0, 1)), poll_of((1, 1, 1)), poll_of((2, 2, 1))])
    consume(monkeypatch, client, driver, [[ACCEPT]] * 3 if mode == "EXPLICIT" else None)
    assert driver.ahead == fetched_ahead
