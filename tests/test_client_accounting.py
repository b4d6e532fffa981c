"""What a consumer does with a poll, whichever library polled it, and how both libraries' client
statistics land in the same columns. No broker: polls are built from dimster's own headers."""

import time
from types import SimpleNamespace

import numpy as np
import pytest

from dimster.clients import ACCEPT, LOCK_LAPSED, REJECT, RELEASE, RENEWED, SETTLED, Answers, Polled, record_keys
from dimster.clients.java import JAVA_METRICS
from dimster.clients.java import client_stats as java_client_stats
from dimster.clients.librdkafka import client_stats as extract_client_stats
from dimster.metrics.client_stats import COLUMNS
from dimster.metrics.histogram import Histogram
from dimster.worker.clients import ConsumerClient, distinct
from dimster.worker.clients.redeliveries import WATCH_FOR_S
from dimster.worker.protocol import ConsumerSpec
from dimster.workload.model import Workload
from dimster.workload.payload import HEADER_SIZE, pack_header, unpack_headers
from tests.held_clock import HeldClock

pytestmark = pytest.mark.unit


def polled(records: list[tuple[int, int, int, int]], delivery_counts=None, foreign: int = 0, first_offset=0) -> Polled:
    """records: (producer id, sequence, intended ns, partition), at offsets first_offset, first_offset + 1
    and so on; `foreign` values without our header."""
    headers = b"".join(pack_header(p, s, t) for p, s, t, _ in records) + bytes(HEADER_SIZE) * foreign
    count = len(records) + foreign
    return Polled(
        partitions=np.array([r[3] for r in records] + [0] * foreign, dtype=np.int32),
        delivery_counts=np.array(delivery_counts or [1] * count, dtype=np.int32),
        headers=headers,
        value_bytes=100 * count,
        offsets=np.arange(first_offset, first_offset + count, dtype=np.int64),
    )


def answered(poll: Polled, status: int = SETTLED) -> Answers:
    """The broker's answer to the acknowledgement of every record of `poll`."""
    keys = record_keys(poll)
    return Answers(keys, np.full(len(keys), status, np.int8))


def consumer(kind="SHARE_GROUP", **keys) -> ConsumerClient:
    workload = Workload.model_validate({"name": "w", "consumerType": kind, **keys})
    client = ConsumerClient(ConsumerSpec(0, "t", "g", kind), workload, "127.0.0.1:1", delivery_count_limit=5)
    client.measure_from = 0.0  # load started long ago: every record is of the measured phase
    return client


@pytest.mark.parametrize("size", [0, 1, 3, 30, 500])
def test_distinct_is_what_numpy_unique_gives(size):
    values = np.random.default_rng(size).integers(0, 7, size=size).astype(np.uint32)
    assert distinct(values) == np.unique(values).tolist()


def test_headers_unpack_in_bulk_and_foreign_values_are_not_ours():
    ours, headers = unpack_headers(pack_header(3, 7, 11) + bytes(HEADER_SIZE) + b"XY" + bytes(21))
    assert ours.tolist() == [True, False, False]
    assert (int(headers["producer_id"][0]), int(headers["sequence"][0]), int(headers["intended_ns"][0])) == (3, 7, 11)


def test_implicit_poll_settles_every_record_once_answered_and_times_it_per_partition_at_receipt():
    client = consumer()
    now = time.time_ns()
    records = [(1, s, now - 5_000_000, s % 2) for s in range(10)] + [(2, 0, now, 1)]
    poll = polled(records, foreign=2)
    client._record(poll, None)
    client._answered(answered(poll))
    interval, histograms = client.take_interval()
    assert (interval.polls, interval.received, interval.max_poll_records) == (1, 13, 13)
    assert interval.max_poll_partitions == 2  # partitions 0 and 1 (the foreign records' 0 among them)
    assert interval.accepted == 13 and interval.received_bytes == 1300
    assert interval.settled == {1: [(0, 9)], 2: [(0, 0)]}
    assert interval.delivery_counts == {1: 13}
    e2e = {key: Histogram.from_wire(wire) for key, wire in histograms.items()}
    assert {key: h.total for key, h in e2e.items()} == {("e2e", 0): 5, ("e2e", 1): 6}
    assert e2e[("e2e", 0)].min >= 5_000  # µs; intended 5 ms before it was polled


def test_released_records_settle_only_on_their_last_delivery():
    client = consumer(acknowledgement={"mode": "EXPLICIT", "releaseFraction": 0.5})
    records = [(1, s, 0, 0) for s in range(4)]
    outcomes = np.array([ACCEPT, RELEASE, RELEASE, REJECT], dtype=np.int8)
    poll = polled(records, delivery_counts=[1, 2, 5, 1])
    client._record(poll, outcomes)
    client._answered(answered(poll))
    interval, _ = client.take_interval()
    assert (interval.accepted, interval.released, interval.rejected) == (1, 2, 1)
    assert interval.settled == {1: [(0, 0), (2, 3)]}  # sequence 1 comes back; 2 was on its last delivery
    assert interval.delivery_counts == {1: 2, 2: 1, 5: 1}


def test_consumer_groups_count_no_share_outcomes():
    client = consumer("CONSUMER_GROUP")
    client._record(polled([(1, 0, 0, 0), (1, 1, 0, 0)]), None)
    interval, _ = client.take_interval()
    assert interval.received == 2 and interval.accepted == 0 and interval.delivery_counts == {}
    assert interval.settled == {1: [(0, 1)]}


def test_outcome_fractions_follow_the_workload():
    client = consumer(acknowledgement={"mode": "EXPLICIT", "releaseFraction": 0.2, "rejectFraction": 0.1})
    outcomes = client._outcomes(100_000)
    shares = np.bincount(outcomes, minlength=3) / len(outcomes)
    assert shares[RELEASE] == pytest.approx(0.2, abs=0.01)
    assert shares[REJECT] == pytest.approx(0.1, abs=0.01)
    assert shares[ACCEPT] == pytest.approx(0.7, abs=0.01)


def test_a_rebuilt_client_marks_the_interval_that_mixes_two_clients():
    client = consumer()
    client._new_generation("librdkafka")
    assert client.take_interval()[0].generation == 1  # the first client: nothing to mix with
    client._new_generation("java")
    mixed, _ = client.take_interval()
    assert (mixed.generation, mixed.library) == (0, "java")
    assert (client.take_interval()[0].generation, client.interval.library) == (2, "java")


def test_both_libraries_fill_the_same_columns():
    librdkafka = extract_client_stats({"time": 1, "tx": 3, "brokers": {}, "topics": {}})
    for role in JAVA_METRICS:
        java = java_client_stats(role, dict.fromkeys(JAVA_METRICS[role], 1.0), 2.0)
        assert tuple(java) == tuple(librdkafka) == COLUMNS


def test_librdkafka_latencies_are_averaged_over_the_brokers_by_count_in_milliseconds():
    """int_latency is a record's wait in the client; outbuf_latency and rtt together make a request's
    latency, as Java's request-latency-avg counts it (from the request's making to its response)."""

    def window(avg_us: float, count: int) -> dict:
        return {"avg": avg_us, "cnt": count}

    brokers = {
        "a:9092/1": {"int_latency": window(2_000, 30), "outbuf_latency": window(100, 3), "rtt": window(4_000, 3)},
        "b:9092/2": {"int_latency": window(6_000, 10), "outbuf_latency": window(500, 1), "rtt": window(8_000, 1)},
        ":0/internal": {"int_latency": window(0, 0), "rtt": window(0, 0)},
    }
    stats = extract_client_stats({"time": 1, "brokers": brokers, "topics": {}})
    assert stats["queue_time_avg_ms"] == pytest.approx(3.0)  # (2 ms * 30 + 6 ms * 10) / 40
    assert stats["request_latency_avg_ms"] == pytest.approx(0.2 + 5.0)  # outbuf (0.3 + 0.5) / 4, rtt (12 + 8) / 4
    idle = extract_client_stats({"time": 1, "brokers": {":0/internal": {"rtt": {"avg": 0, "cnt": 0}}}, "topics": {}})
    assert idle["queue_time_avg_ms"] == idle["request_latency_avg_ms"] == 0.0
    java = JAVA_METRICS["producer"]
    assert java["queue_time_avg_ms"] == "producer-metrics:record-queue-time-avg"
    assert java["request_latency_avg_ms"] == "producer-metrics:request-latency-avg"


def test_java_records_per_batch_come_from_batch_bytes_and_topic_rates():
    values = dict.fromkeys(JAVA_METRICS["producer"], 0.0)
    values.update({"batch_bytes_avg": 16_000.0, "_topic_record_rate": 2_000.0, "_topic_byte_rate": 500_000.0})
    stats = java_client_stats("producer", values, 0.0)
    assert stats["batch_records_avg"] == pytest.approx(64.0)  # 16,000 bytes per batch / 250 bytes per record
    assert "_topic_byte_rate" not in stats
    idle = java_client_stats("producer", dict.fromkeys(JAVA_METRICS["producer"], 0.0), 0.0)
    assert idle["batch_records_avg"] == 0.0


def test_every_statistic_is_a_float_whichever_library():
    """Parquet parts of one run must agree on column types; Spark refuses INT64 where DOUBLE was."""
    librdkafka = extract_client_stats({"time": 1, "tx": 3, "rxmsgs": 7, "brokers": {"b": {"req": {"Fetch": 2}}}})
    java = java_client_stats("share_consumer", dict.fromkeys(JAVA_METRICS["share_consumer"], 1), 2.0)
    assert {type(v) for v in librdkafka.values()} == {type(v) for v in java.values()} == {float}


def test_java_producer_reports_each_record_it_could_not_send():
    """No broker: every record fails (metadata never arrives) and comes back as its sequence number."""
    from dimster.clients.java import JavaProducer
    from dimster.clients.jvm import start_jvm
    from dimster.environment import DEFAULT_KAFKA_VERSION
    from dimster.workload.payload import make_bodies

    start_jvm(DEFAULT_KAFKA_VERSION)
    properties = {"bootstrap.servers": "127.0.0.1:9", "max.block.ms": 50}
    stats = []
    driver = JavaProducer(properties, "p0", "nowhere", 3, make_bodies(100, "RANDOM", 0), stats.append)
    intended = [time.time() - 0.5 + i / 1000 for i in range(4)]
    handed_over, sent_bytes = driver.send(40, intended, [(None, -1)] * 4)
    assert sent_bytes == 4 * 100 and len(handed_over) == 4
    assert all(h >= i for h, i in zip(handed_over, intended, strict=True))  # publish delay is never negative
    assert driver.close(1.0) == 0  # nothing was left in flight: each send had failed already
    latencies, failed = driver.take_acks()
    assert len(latencies) == 0 and failed == [40, 41, 42, 43]


def test_librdkafka_producer_closing_with_records_unacknowledged_reports_each_as_failed(monkeypatch):
    """No broker: the records wait in librdkafka's queue; a close that times out purges them, each
    comes back as a failed sequence (never acknowledged, so never counted lost), as on the Java side."""
    from confluent_kafka import KafkaException, Producer

    from dimster.clients import librdkafka
    from dimster.workload.payload import make_bodies

    class NoMetadataWait(Producer):  # the driver's first metadata request would wait its 10 s for nobody
        def list_topics(self, *args, **kwargs):
            raise KafkaException("no broker here")

    monkeypatch.setattr(librdkafka, "Producer", NoMetadataWait)
    properties = {"bootstrap.servers": "127.0.0.1:9", "message.timeout.ms": 600_000}
    bodies = make_bodies(100, "RANDOM", 0)
    driver = librdkafka.LibrdkafkaProducer(properties, "p0", "nowhere", 3, bodies, lambda _: None)
    driver.send(40, [time.time()] * 5, [(None, -1)] * 5)
    time.sleep(1)  # as on a busy host: the client's failed connections wait in its queue as log events
    assert driver.close(0) == 5  # the records purged, by their reports: not librdkafka's queue length
    latencies, failed = driver.take_acks()
    assert len(latencies) == 0 and sorted(failed) == [40, 41, 42, 43, 44]


def test_java_statistics_are_read_in_one_call_and_land_in_their_columns():
    """A Java client's metrics come back as one Java array; each value goes to the columns of its metric."""
    import jpype

    from dimster.clients.java import _Statistics
    from dimster.clients.jvm import start_jvm
    from dimster.environment import DEFAULT_KAFKA_VERSION

    start_jvm(DEFAULT_KAFKA_VERSION)
    stats = []
    statistics = _Statistics("producer", stats.append)
    statistics.next_at = 0.0  # due now
    client = SimpleNamespace(metrics=lambda names: jpype.JArray(jpype.JDouble)([i + 1.0 for i in range(len(names))]))
    statistics.maybe_take(client)
    statistics.maybe_take(client)  # not due again for STATS_INTERVAL_S
    [taken] = stats
    position = {metric: i + 1.0 for i, metric in enumerate(statistics.metrics)}
    named = {c: m for c, m in JAVA_METRICS["producer"].items() if not c.startswith("_")}
    assert {c: taken[c] for c in named} == {c: position[m] for c, m in named.items()}
    assert len(set(position.values())) == len(statistics.metrics) > 5


def test_a_lock_that_ran_out_on_the_last_delivery_archives_the_record():
    """The broker refuses such acknowledgements without a word: the consumer counts them itself,
    except those it rejected (rejected either way); earlier deliveries come back and are not archived."""
    client = consumer(acknowledgement={"mode": "EXPLICIT"})
    records = [(1, s, 0, 0) for s in range(4)]
    outcomes = np.array([ACCEPT, RELEASE, REJECT, ACCEPT], dtype=np.int8)
    poll = polled(records, delivery_counts=[5, 5, 5, 4])
    client._record(poll, outcomes)
    client._lapsed_on_last_delivery(poll, outcomes)
    # the broker: the archived and the rejected took effect; the fourth's lock had run out
    client._answered(Answers(record_keys(poll), np.array([SETTLED] * 3 + [LOCK_LAPSED], dtype=np.int8)))
    interval, _ = client.take_interval()
    assert interval.settled_archived == {1: [(0, 1)]} and interval.lock_timeouts == 3
    assert interval.settled == {1: [(0, 2)]}  # the fourth comes back; sequence 2 is rejected
    assert (interval.accepted, interval.rejected, interval.settled_rejected) == (0, 1, {(1, 5): [(2, 2)]})


def test_the_group_config_sets_the_delivery_count_limit_live():
    client = consumer(acknowledgement={"mode": "EXPLICIT"}, groupConfig={"share.delivery.count.limit": 3})
    assert client.delivery_count_limit == 3
    client.workload = Workload.model_validate({"name": "w", "acknowledgement": {"mode": "EXPLICIT"}})
    assert client.delivery_count_limit == 5  # the broker's again


def test_a_crashed_consumers_records_are_timed_when_they_come_back():
    client = consumer()
    crashed_at = time.time() - 2.0
    client.watch({1: [(0, 2)], 2: [(7, 7)]}, crashed_at)
    # sequence 0 again (delivery 2), 1 on a first delivery (not a redelivery), 7 of producer 2 again
    client._record(polled([(1, 0, 0, 0), (1, 1, 0, 0), (2, 7, 0, 1)], delivery_counts=[2, 1, 2]), None)
    interval, histograms = client.take_interval()
    assert interval.redelivered_after_crash == 2
    delays = Histogram.from_wire(histograms[("redelivery", -1)])
    assert delays.total == 2 and delays.min >= 2_000_000  # µs since the crash
    assert client.crash_watch.watches == [(crashed_at, {(1, 1), (1, 2)})]  # still waiting for these


def test_a_crash_heard_of_late_still_times_the_records_received_before():
    client = consumer()
    crashed_at = time.time() - 3.0
    client._record(polled([(1, 0, 0, 0)], delivery_counts=[2]), None)  # back before the watch arrived
    client.watch({1: [(0, 1)]}, crashed_at)
    interval, histograms = client.take_interval()
    assert interval.redelivered_after_crash == 1
    assert Histogram.from_wire(histograms[("redelivery", -1)]).min >= 3_000_000
    assert client.crash_watch.watches == [(crashed_at, {(1, 1)})]


def test_a_refusal_of_a_lapse_counted_already_is_not_counted_again():
    client = consumer(acknowledgement={"mode": "EXPLICIT"})
    poll = polled([(1, 0, 0, 0), (1, 1, 0, 0)], delivery_counts=[5, 1], first_offset=42)
    client._record(poll, np.array([ACCEPT, ACCEPT], dtype=np.int8))
    client._lapsed_on_last_delivery(poll, None)  # offset 42, on its last delivery
    client._answered(answered(poll, LOCK_LAPSED))
    interval, _ = client.take_interval()
    assert interval.lock_timeouts == 2  # offset 42 once, 43 once
    assert interval.settled == interval.settled_archived == {1: [(0, 0)]}  # 43 comes back


def test_a_renewal_may_take_until_the_lock_it_renews_runs_out(monkeypatch):
    """Processing of 2.5 s under a 4 s lock renews once, at half the lock, and gives that renewal
    the rest of the lock (2 s), not a fixed fraction of it. On a clock the test holds, which the
    processing's waits move: a thread of the niced unit tier may wait seconds for a CPU."""
    from dimster.worker.clients import consumer as consumer_module

    client = consumer(
        acknowledgement={"mode": "EXPLICIT", "renewLocks": True},
        clientLibrary={"shareConsumer": "java"},
        consumerProcMsMin=2500,
        consumerProcMsMax=2500,
    )
    held = HeldClock(now=1000.0)
    monkeypatch.setattr(consumer_module, "time", held)

    class Waits:
        """The processing's pauses: each passes the time it asks for, at once."""

        def is_set(self) -> bool:
            return False

        def wait(self, seconds: float) -> bool:
            held.now += seconds
            return False

    client.wake = Waits()  # type: ignore[assignment]
    timeouts = []

    def renew(timeout: float) -> np.ndarray:
        timeouts.append((held.now, timeout))
        return np.array([RENEWED], dtype=np.int8)

    from_poll = client._process(SimpleNamespace(renew=renew), polled([(1, 0, 0, 0)]), held.now, lock_s=4.0)
    assert not from_poll and held.now == pytest.approx(1002.5)  # processed for its 2.5 s
    # at half the lock, for the 2 s left of it: a quarter of the lock was the old, too short, limit
    assert timeouts == [(pytest.approx(1002.0), pytest.approx(2.0))]
    assert client.take_interval()[0].renewed == 1


def test_a_crash_is_watched_for_no_longer_than_its_horizon():
    """Records of a crash another consumer took never reach this one: the watch goes once WATCH_FOR_S
    has passed, at the next redelivery or the next crash, so a long run's crashes do not pile up."""
    client = consumer()
    now = time.time()
    client.watch({1: [(0, 999)]}, now - WATCH_FOR_S - 5)  # another consumer took all of them
    client.watch({1: [(1000, 1001)]}, now - 1.0)
    assert [at for at, _ in client.crash_watch.watches] == [now - 1.0]
    client.watch({2: [(0, 0)]}, now - WATCH_FOR_S + 60)
    client._record(polled([(1, 1000, 0, 0)], delivery_counts=[2]), None)
    assert [(at, len(keys)) for at, keys in client.crash_watch.watches] == [(now - 1.0, 1), (now - WATCH_FOR_S + 60, 1)]


def test_a_consumer_remembers_its_last_redeliveries_in_a_ring_oldest_overwritten_first():
    """RecentRecords keeps the last `size` records (20 bytes each) and finds those since a time."""
    from dimster.worker.clients.redeliveries import RecentRecords

    recent = RecentRecords(4)
    recent.add(10.0, np.array([1, 1, 1]), np.array([0, 1, 2]))
    assert len(recent) == 3 and recent.since(0.0) == [(10.0, 1, 0), (10.0, 1, 1), (10.0, 1, 2)]
    recent.add(11.0, np.array([2, 2]), np.array([7, 8]))  # overwrites sequence 0, the oldest
    assert len(recent) == 4 and sorted(recent.since(0.0)) == [(10.0, 1, 1), (10.0, 1, 2), (11.0, 2, 7), (11.0, 2, 8)]
    assert sorted(recent.since(10.5)) == [(11.0, 2, 7), (11.0, 2, 8)]
    recent.add(12.0, np.arange(6), np.arange(100, 106))  # more than it holds: the last 4
    assert sorted(recent.since(0.0)) == [(12.0, p, 100 + p) for p in range(2, 6)]
    assert recent.rows.nbytes == 4 * 20


@pytest.mark.parametrize("together", [False, True])
def test_a_late_answer_for_the_delivery_before_does_not_decide_the_record_that_came_back(together):
    """A record back (its state lost with a leader that stalled) before the answer to its last
    acknowledgement: that answer, coming late, is the earlier delivery's; the record settles by the
    answer to its new one. Taken for the new delivery's, a refusal of the old lock counted the record
    as a lock time-out that never came back, and the answer that settled it was dropped: lost."""
    client = consumer()
    poll = polled([(1, 0, 0, 0), (1, 1, 0, 0)], first_offset=7)
    client._record(poll, None)
    client._record(polled([(1, 0, 0, 0)], first_offset=7), None)  # offset 7 again, still unanswered
    stale, fresh = answered(poll, LOCK_LAPSED), answered(poll)
    if together:  # in one batch, the old answer first
        both = (np.concatenate((stale.keys, fresh.keys)), np.concatenate((stale.status, fresh.status)))
        client._answered(Answers(*both))
    else:
        client._answered(stale)
        client._answered(fresh)
    interval, _ = client.take_interval()
    assert interval.ack_errors == 1  # the record that came back unanswered
    # offset 8's first answer was its own: a lapse (it comes back); offset 7 settles by its second
    assert interval.lock_timeouts == 1 and interval.settled == {1: [(0, 0)]}
    assert not client.unsettled.stale and len(client.unsettled) == 0
