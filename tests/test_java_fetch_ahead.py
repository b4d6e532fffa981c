"""The Java share consumer driver fetching ahead (clients/java.py `fetch_ahead`, DimsterShareConsumer's
fetching thread, DimsterFetchAhead), on the real `local` cluster, in this process's JVM: every record
is handed over once, the broker's answer to a record's acknowledgement never reaches Python before the
record itself, switching it off and on mid-drain loses nothing, and a halt says what the thread held:
the batch it fetched and never handed over (back after its lock times out, unless a close settles it),
and whether that fetch accepted the batch before it."""

import time
import uuid

import pytest

from dimster.clients import SETTLED, Polled, record_keys
from dimster.clients.java import JavaConsumer
from dimster.clients.jvm import start_jvm
from dimster.environment import DEFAULT_KAFKA_VERSION
from tests.kafka_clients import create_topic, produce_numbers, share_group_from_earliest
from tests.waiting import until

pytestmark = pytest.mark.kafka

MAX_POLL_RECORDS = 50
LOCK_MS = 2_000  # the crashed consumer's records come back this long after their fetch


def share_consumer(bootstrap: str, topic: str, group: str) -> JavaConsumer:
    start_jvm(DEFAULT_KAFKA_VERSION)
    properties = {"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": MAX_POLL_RECORDS}
    properties["share.acquire.mode"] = "record_limit"  # polls of MAX_POLL_RECORDS, not whole batches
    consumer = JavaConsumer(properties, f"c-{uuid.uuid4().hex[:6]}", True, lambda _stats: None)
    consumer.subscribe(topic)
    return consumer


def keys(polled: Polled | None) -> list[int]:
    return [] if polled is None else record_keys(polled).tolist()


def test_fetching_ahead_hands_each_record_over_once_and_answers_it_only_after(local_cluster):
    """3,000 records through one consumer that takes 5 ms between a poll and its look at the answers
    (and 200 ms after every fifth poll), fetching ahead but for 20 polls in the middle: each record
    handed over once, each answered SETTLED once, and never by the look that follows the poll that
    handed it over (its answer may come during those 5 ms; Python accounts for a poll's records before
    it reads the answers of the next look); the batches fetched while Python was away waited for it."""
    topic, group, count = create_topic(local_cluster, 3), f"g-{uuid.uuid4().hex[:8]}", 3_000
    produce_numbers(local_cluster, topic, count)
    share_group_from_earliest(local_cluster, group)
    consumer = share_consumer(local_cluster, topic, group)
    handed: set[int] = set()
    answered: list[int] = []
    waited: list[float] = []
    polls = 0
    deadline = time.monotonic() + 120
    while len(handed) < count and time.monotonic() < deadline:
        consumer.fetch_ahead(not 10 <= polls < 30)
        polled = consumer.poll(0.5)
        time.sleep(0.005)  # a busy worker's thread between the two, or dimster's accounting of a poll
        answers = consumer.take_answers()
        early = set(answers.keys.tolist()) - handed
        assert not early, f"poll {polls}: answers for {len(early)} record(s) not accounted for yet"
        assert (answers.status == SETTLED).all(), (polls, answers.status.tolist())
        answered += answers.keys.tolist()
        fresh = keys(polled)
        assert not handed.intersection(fresh) and len(set(fresh)) == len(fresh), f"poll {polls}: twice"
        handed.update(fresh)
        if polled is not None:
            polls += 1
            waited.append(polled.waited_s)
            if polls % 5 == 0:
                time.sleep(0.2)  # away for longer than any fetch takes, even on a busy host
    halted = consumer.halt()
    rest = keys(halted.unseen)
    assert not handed.intersection(rest) and len(set(rest)) == len(rest)
    handed.update(rest)
    consumer.close()
    answered += consumer.take_answers().keys.tolist()
    assert len(handed) == count and polls > 30, (len(handed), polls)
    assert sorted(answered) == sorted(handed), (len(answered), len(set(answered)))  # the last poll's by the close
    assert max(waited) > 0.02, waited  # batches fetched while Python was away waited for it
    assert waited[11:30] == [0.0] * 19, waited  # not fetched ahead: taken as polled (the 11th: what was fetched)


def test_a_halt_names_the_batch_fetched_ahead_which_comes_back_unless_settled(local_cluster):
    """A consumer takes one poll (A) and halts while its thread holds the next (B): the halt says A was
    accepted by B's fetch and hands B over. Left without a close (a crash), B comes back to another
    consumer of the group on delivery 2 after B's lock times out, A never does, and every other record
    comes once, or twice if the crashed client's own fetch had acquired it without handing it over (a
    share consumer's fetch buffer holds acquired records: fresh clone r127 saw some come back so)."""
    topic, group, count = create_topic(local_cluster, 1), f"g-{uuid.uuid4().hex[:8]}", 400
    produce_numbers(local_cluster, topic, count)
    share_group_from_earliest(local_cluster, group, {"share.record.lock.duration.ms": str(LOCK_MS)})
    crashing = share_consumer(local_cluster, topic, group)
    crashing.fetch_ahead(True)
    polls = (crashing.poll(0.5) for _ in range(120))
    first = next((polled for polled in polls if polled is not None), None)  # within 60 s
    assert first is not None
    assert until(lambda: crashing.java.fetchedAhead() == 1, timeout=60)  # B, waiting to be taken
    halted = crashing.halt()
    assert halted.last_accepted and halted.unseen is not None
    a, b = set(keys(first)), set(keys(halted.unseen))
    assert a and b and not a & b
    other = share_consumer(local_cluster, topic, group)
    other.fetch_ahead(True)
    seen: dict[int, int] = {}  # key -> delivery count
    deadline = time.monotonic() + 90
    while len(seen) < count - len(a) and time.monotonic() < deadline:
        polled = other.poll(0.5)
        if polled is not None:
            for key, delivery in zip(keys(polled), polled.delivery_counts.tolist(), strict=True):
                assert key not in seen, "handed over twice"
                seen[key] = delivery
    other.halt()
    other.close()
    crashing.close()
    assert not a & set(seen), "the accepted batch came back"
    assert b <= set(seen) and {seen[key] for key in b} == {2}  # back after the crashed client's lock
    assert len(seen) == count - len(a)
    assert {seen[key] for key in seen.keys() - b} <= {1, 2}  # 2: acquired by the crashed client, never handed over
