"""librdkafka (confluent-kafka): `clientLibrary: librdkafka`. Its drivers, the check of its
properties, its statistics (the `statistics.interval.ms` JSON) and its security (the profiles' own
names): the plug dimster/client_libraries.py registers."""

import contextlib
import json
import logging
import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import AcknowledgeType, Consumer, KafkaError, KafkaException, Message, Producer, ShareConsumer

from dimster.clients import (
    KEY_PARTITION_SHIFT,
    LOCK_LAPSED,
    REFUSED,
    SETTLED,
    STATS_INTERVAL_S,
    Answers,
    Halted,
    Polled,
    Rebalance,
)
from dimster.clients.properties import ROLE_SECTIONS
from dimster.kafka.properties import property_text
from dimster.kafka.security import ClientSecurity
from dimster.metrics.client_stats import COLUMNS, REQUEST_KINDS
from dimster.secret_keys import is_secret_key
from dimster.workload.distributor import Choice
from dimster.workload.model import Workload
from dimster.workload.payload import HEADER_SIZE, body_intact, pack_header, unpack_header

log = logging.getLogger("dimster.worker")
_quiet = logging.getLogger("dimster.client-check")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False

OUTCOMES = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT)
# Java-client settings librdkafka lacks, and what to do instead.
UNSUPPORTED = {
    ("share_consumer", "share.acquire.mode"): (
        "is not supported by librdkafka's share consumer (confluent-kafka 2.16 rejects it); "
        "set clientLibrary.shareConsumer: java to run Kafka's Java share consumer (or the key to null to drop it)"
    ),
}
BATCH = ("consumer", "max.poll.records")  # applied by dimster as the consume() batch size


def _config(properties: dict, client_id: str, on_stats) -> dict:
    def stats(stats_json: str) -> None:
        with contextlib.suppress(ValueError):
            on_stats(client_stats(json.loads(stats_json)))

    return {
        "client.id": client_id,
        "statistics.interval.ms": int(STATS_INTERVAL_S * 1000),
        **properties,
        "logger": logging.getLogger(f"librdkafka.{client_id}"),
        "stats_cb": stats,
    }


class LibrdkafkaProducer:
    def __init__(self, properties: dict, client_id: str, topic: str, producer_id: int, bodies: list[bytes], on_stats):
        self.topic, self.producer_id, self.bodies = topic, producer_id, bodies
        self._latencies: list[float] = []  # seconds, from the delivery callback
        self._failed: list[int] = []
        config = _config(properties, client_id, on_stats)
        self.producer = Producer({**config, "on_delivery": self._on_delivery})  # set once, not per record
        with contextlib.suppress(KafkaException):  # the topic's leaders now, not with the first record
            self.producer.list_topics(topic, timeout=10)

    def _on_delivery(self, err, msg) -> None:
        # Runs inside poll()/flush() on the client's thread: collect here, count per poll.
        if err is None:
            self._latencies.append(msg.latency())
            return
        header = unpack_header(msg.value())
        assert header is not None  # every value this producer sends has the header
        self._failed.append(header[1])

    def send(self, first_sequence: int, intended: list[float], choices: list[Choice]) -> tuple[np.ndarray, int]:
        produce, poll, topic, bodies = self.producer.produce, self.producer.poll, self.topic, self.bodies
        distinct = len(bodies)
        handed_over = []
        sent_bytes = 0
        sequence = first_sequence
        for intended_at, (key, partition) in zip(intended, choices, strict=True):
            value = pack_header(self.producer_id, sequence, int(intended_at * 1e9)) + bodies[sequence % distinct]
            while True:
                try:
                    if partition >= 0:
                        produce(topic, value, key, partition)
                    else:
                        produce(topic, value, key)
                    break
                except BufferError:  # the client's queue is full: we are behind, let it drain
                    poll(0.005)
            handed_over.append(time.time())
            sent_bytes += len(value)
            sequence += 1
        return np.array(handed_over), sent_bytes

    def serve(self) -> None:
        self.producer.poll(0)

    def take_acks(self) -> tuple[np.ndarray, list[int]]:
        latencies, failed = np.array(self._latencies) * 1e6, self._failed
        self._latencies, self._failed = [], []
        return latencies, failed

    def close(self, timeout: float) -> int:
        """Flush for up to `timeout` s, then purge what is still unacknowledged: each purged record gets
        its delivery report as a failure, so it counts as never acknowledged (as the Java producer's
        close does), not as acknowledged and lost. Returns how many were purged, by their reports
        (flush()'s count holds librdkafka's own requests and events too: more on a busy host)."""
        if not self.producer.flush(timeout):
            return 0
        failed_before = len(self._failed)
        self.producer.purge()  # queued and in flight alike
        self.producer.flush(5)  # serves the purged records' delivery reports
        return len(self._failed) - failed_before


class LibrdkafkaConsumer:
    """A share-group member (ShareConsumer) or a consumer-group member (Consumer)."""

    def __init__(self, properties: dict, client_id: str, share: bool, on_stats, verify: bool = False):
        self.share, self.verify = share, verify
        self._messages: list = []  # the last poll's, for explicit acknowledgement
        self._rebalances: list[Rebalance] = []
        config = _config(properties, client_id, on_stats)
        self._answered: list[int] = []  # keys of the records acknowledged, as the callback answered them
        self._status: list[int] = []  # SETTLED, LOCK_LAPSED or REFUSED, one per key
        self.consumer: ShareConsumer | Consumer
        if share:
            self.consumer, self.batch = ShareConsumer(config), 0
            self.consumer.set_acknowledgement_commit_callback(self._on_acknowledged)
        else:
            self.batch = int(config.pop("max.poll.records", 500))  # a Java setting: the consume() batch here
            self.consumer = Consumer(config)

    def subscribe(self, topic: str) -> None:
        if isinstance(self.consumer, ShareConsumer):
            self.consumer.subscribe([topic])
            return

        def note(kind: str):  # confluent-kafka assigns or unassigns itself after the callback
            return lambda _consumer, partitions: self._rebalances.append((time.time(), kind, len(partitions)))

        self.consumer.subscribe([topic], on_assign=note("assigned"), on_revoke=note("revoked"), on_lost=note("lost"))

    def take_rebalances(self) -> list[Rebalance]:
        taken, self._rebalances = self._rebalances, []
        return taken

    def _group_member(self) -> Consumer:
        """The consumer-group member, for what only consumer groups are asked (assignment, pausing)."""
        assert isinstance(self.consumer, Consumer)
        return self.consumer

    def assigned_partitions(self) -> list[int]:
        return sorted(tp.partition for tp in self._group_member().assignment())

    def pause_only(self, paused: set[int]) -> None:
        consumer = self._group_member()
        assigned = consumer.assignment()
        consumer.pause([tp for tp in assigned if tp.partition in paused])
        consumer.resume([tp for tp in assigned if tp.partition not in paused])

    def poll(self, timeout: float) -> Polled | None:
        consumer = self.consumer
        messages: Iterable[Message]
        if isinstance(consumer, ShareConsumer):
            messages = consumer.poll(timeout)
        else:
            messages = consumer.consume(self.batch, timeout)
        good = []
        for message in messages or ():
            if message.error():
                log.warning("%s", message.error())
            else:
                good.append(message)
        self._messages = good
        if not good:
            return None
        values = [m.value() or b"" for m in good]
        heads = [v[:HEADER_SIZE] for v in values]
        if any(len(h) < HEADER_SIZE for h in heads):
            heads = [h.ljust(HEADER_SIZE, b"\0") for h in heads]
        count = len(good)
        deliveries = (m.delivery_count() or 1 for m in good) if self.share else (1 for _ in good)
        return Polled(
            partitions=np.fromiter((m.partition() for m in good), np.int32, count),
            delivery_counts=np.fromiter(deliveries, np.int32, count),
            headers=b"".join(heads),
            value_bytes=sum(map(len, values)),
            offsets=np.fromiter((m.offset() for m in good), np.int64, count),
            intact=np.fromiter((body_intact(v[HEADER_SIZE:]) for v in values), bool, count) if self.verify else None,
        )

    def acknowledge(self, outcomes: np.ndarray) -> None:
        assert isinstance(self.consumer, ShareConsumer)  # only share consumers acknowledge records
        acknowledge = self.consumer.acknowledge
        for message, outcome in zip(self._messages, outcomes.tolist(), strict=True):
            acknowledge(message, OUTCOMES[outcome])

    def _on_acknowledged(self, offsets: dict, exception) -> None:
        """The broker's answer to acknowledgements of some records: every acknowledgement is answered,
        accepted, released and rejected alike, in implicit mode too. Runs inside poll()/commit_sync()/
        close() on the client's thread."""
        if exception is None:
            status = SETTLED
        elif exception.args[0].code() == KafkaError.INVALID_RECORD_STATE:  # the record's lock had timed out
            status = LOCK_LAPSED
        else:
            status = REFUSED
        for tp, found in offsets.items():
            base = tp.partition << KEY_PARTITION_SHIFT
            self._answered.extend(base | offset for offset in found)
            self._status.extend([status] * len(found))

    def take_answers(self) -> Answers:
        if not self._answered:
            return Answers.none()
        answers = Answers(np.array(self._answered, np.int64), np.array(self._status, np.int8))
        self._answered, self._status = [], []
        return answers

    def lock_timeout_ms(self) -> float | None:
        return None  # confluent-kafka 2.16 does not tell

    def renew(self, timeout: float) -> np.ndarray:
        raise NotImplementedError("librdkafka has no AcknowledgeType.RENEW (refused when the workload is read)")

    def fetch_ahead(self, on: bool) -> None:
        """librdkafka fetches ahead on threads of its own, always."""

    def halt(self) -> Halted:
        return Halted()

    def close(self) -> None:
        try:
            # a share consumer settles the last poll (implicit mode accepts it here) before leaving the group
            if isinstance(self.consumer, ShareConsumer):
                self.consumer.commit_sync()
        except KafkaException as e:
            log.warning("committing before close: %s", e)
        finally:
            self.consumer.close()  # a share consumer releases whatever it still holds


PRODUCER = LibrdkafkaProducer
CONSUMER = LibrdkafkaConsumer


def client_security(security: ClientSecurity) -> dict[str, str]:
    """librdkafka's names are the profiles' own."""
    return dict(security or {})


def prepare_process(log_file: Path, kafka_version: str, clients_version: str) -> None:
    """Nothing to ready: confluent-kafka is imported with this module."""


def check(workload: Workload, roles: list[str], kafka_version: str) -> Iterator[str]:
    """Each role's client, built from its properties: what librdkafka refuses."""
    common = workload.kafka_config.common_config  # goes to every client of the run
    sections = workload.kafka_config.model_dump(by_alias=True)
    for role in roles:
        if problem := check_properties(role, ROLE_SECTIONS[role], common, sections[ROLE_SECTIONS[role]]):
            yield problem


CLIENT_CLASSES = {"producer": Producer, "consumer": Consumer, "share_consumer": ShareConsumer}


def check_properties(role: str, section: str, common: dict, properties: dict) -> str | None:
    """Build the role's client from the properties and close it: librdkafka's own verdict, as one line."""
    for key in properties:
        if (role, key) in UNSUPPORTED:
            return f"kafkaConfig.{section}.{key} {UNSUPPORTED[(role, key)]}"
    config = {
        **{k: property_text(v) for k, v in common.items()},
        **{k: property_text(v) for k, v in properties.items() if (role, k) != BATCH},
    }
    try:
        _built(role, config)
    except KafkaException as e:
        text = e.args[0].str()
        where = "commonConfig" if any(f'"{key}"' in text for key in common) else section
        return f"kafkaConfig.{where}: {text}"
    for key, value in config.items():  # librdkafka reads `5ms` as 5; Kafka's Java clients refuse it
        if (number := NUMBER_WITH_WORD.match(value)) and not is_secret_key(key) and not _takes_a_word(role, key):
            where = "commonConfig" if key in common and key not in properties else section
            return (
                f"kafkaConfig.{where}.{key}: '{value}' is not a number (librdkafka reads it as {number[1]}, "
                f"Kafka's Java clients refuse it): write {number[1]}"
            )
    return None


NUMBER_WITH_WORD = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*[A-Za-z]+\s*$")  # 5ms, 64KB, 1s


def _built(role: str, config: dict[str, str]) -> None:
    """The role's client built from `config` and closed; KafkaException where librdkafka refuses it."""
    group = {} if role == "producer" else {"group.id": "dimster-check"}
    client = CLIENT_CLASSES[role]({**config, **group, "logger": _quiet})
    if role == "producer":
        client.flush(0)
    else:
        client.close()


def _takes_a_word(role: str, key: str) -> bool:
    """Whether librdkafka takes a word for `key` (a number-only property refuses one)."""
    try:
        _built(role, {key: "word"})
    except KafkaException:
        return False
    return True


def client_stats(stats: dict[str, Any]) -> dict[str, float]:
    """From librdkafka's statistics JSON."""
    out: dict[str, float] = dict.fromkeys(COLUMNS, 0.0)
    out.update(
        {
            "ts_us": stats.get("time", 0) * 1_000_000,
            "tx_requests": stats.get("tx", 0),
            "tx_bytes": stats.get("tx_bytes", 0),
            "rx_responses": stats.get("rx", 0),
            "rx_bytes": stats.get("rx_bytes", 0),
            "tx_msgs": stats.get("txmsgs", 0),
            "tx_msg_bytes": stats.get("txmsg_bytes", 0),
            "rx_msgs": stats.get("rxmsgs", 0),
            "rx_msg_bytes": stats.get("rxmsg_bytes", 0),
        }
    )
    requests = dict.fromkeys(REQUEST_KINDS, 0)
    brokers = list(stats.get("brokers", {}).values())
    for broker in brokers:
        for kind, count in (broker.get("req") or {}).items():
            if kind in requests:
                requests[kind] += count
    out.update({f"requests_{kind.lower()}": count for kind, count in requests.items()})
    # the window averages (microseconds) of the brokers' connections, weighted by what each counted:
    # int_latency is a produced record's wait in the client's queue; a request then waits in the
    # connection's output buffer (outbuf_latency) and for its response (rtt), which Java's
    # request-latency-avg counts together
    out["queue_time_avg_ms"] = _weighted_avg_ms(brokers, "int_latency")
    out["request_latency_avg_ms"] = _weighted_avg_ms(brokers, "outbuf_latency") + _weighted_avg_ms(brokers, "rtt")
    # Producer batches: weighted over topics by how many batches each saw in the window.
    batches = size_sum = count_sum = 0.0
    for topic in stats.get("topics", {}).values():
        size, count = topic.get("batchsize") or {}, topic.get("batchcnt") or {}
        n = size.get("cnt", 0)
        batches += n
        size_sum += size.get("avg", 0) * n
        count_sum += count.get("avg", 0) * n
    out["batch_bytes_avg"] = size_sum / batches if batches else 0.0
    out["batch_records_avg"] = count_sum / batches if batches else 0.0
    return {column: float(value) for column, value in out.items()}  # one Parquet type for both libraries


def _weighted_avg_ms(brokers: list[dict], window: str) -> float:
    """The average of librdkafka's `window` statistic over all broker connections, in ms (0: none counted)."""
    windows = [b.get(window) or {} for b in brokers]
    count = sum(w.get("cnt", 0) for w in windows)
    return sum(w.get("avg", 0) * w.get("cnt", 0) for w in windows) / count / 1000 if count else 0.0
