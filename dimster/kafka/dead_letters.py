"""A share group's dead-letter topic on the cluster (KIP-1191, Kafka 4.4): whether the cluster writes
one, the topic itself, and what it holds. A dead-letter record carries its source in headers
(`__dlq.errors.topic`, `.partition`, `.offset`, `.group`), and the record's own key and value only when
the group copies them; a record's producer and sequence number are read from its source when not."""

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from dimster.errors import DimsterError
from dimster.kafka.distribution import kafka_distribution
from dimster.kafka.helper import run_helper
from dimster.kafka.records import every_record, partitions_of, reader, records_until
from dimster.kafka.security import ClientSecurity
from dimster.workload.dead_letter import AUTO_CREATE, OLDEST_SHARE_VERSION, PREFIX, TOPIC_ENABLE, DeadLetterQueue
from dimster.workload.payload import unpack_header

HEADER = "__dlq.errors."
Source = tuple[str, str, int, int]  # group, topic, partition, offset of the record dead-lettered


@dataclass(frozen=True)
class ClusterSettings:
    share_version: int
    prefix: str  # what every dead-letter topic's name must start with ("" when any name will do)
    auto_create: bool


def cluster_settings(broker_config: dict, bootstrap: str, version: str, security) -> ClusterSettings:
    """The finalized share.version (through Kafka's Admin API in dimster's Java helper) and the
    cluster's two dead-letter configs, from a broker's described config."""
    result = run_helper(kafka_distribution(version), "share-health", bootstrap, security=security)
    try:
        share_version = int(json.loads(result.stdout.strip().splitlines()[-1])["shareVersion"])
    except (IndexError, KeyError, ValueError):
        raise DimsterError(f"the finalized share.version of the cluster at {bootstrap} could not be read") from None
    prefix = broker_config[PREFIX].value if PREFIX in broker_config else "dlq."  # the broker's default
    auto = broker_config.get(AUTO_CREATE)
    return ClusterSettings(share_version, prefix, bool(auto and auto.value == "true"))


def refusal(queue: DeadLetterQueue, topic: str, settings: ClusterSettings, version: str) -> str | None:
    """Why the cluster would write no dead-letter record for this queue (it archives in silence then)."""
    if settings.share_version < OLDEST_SHARE_VERSION:
        return (
            f"deadLetterQueue needs share.version={OLDEST_SHARE_VERSION} (Kafka 4.4 or newer, KIP-1191): the "
            f"cluster (kafkaVersion {version}) has share.version={settings.share_version}"
        )
    if not topic.startswith(settings.prefix):
        return (
            f"deadLetterQueue.topic '{topic}' does not start with the cluster's {PREFIX} "
            f"'{settings.prefix}': name it '{settings.prefix}…'"
        )
    if not queue.create_topic and not settings.auto_create:
        return (
            f"deadLetterQueue.createTopic: false needs {AUTO_CREATE}=true on the brokers (brokerConfig), "
            "or createTopic: true"
        )
    return None


def dead_letter_topic(topic: str, partitions: int, replication: int) -> NewTopic:
    """A dead-letter topic of dimster's: the broker writes to a topic it did not create only when the
    topic says so."""
    return NewTopic(topic, partitions, replication, config={TOPIC_ENABLE: "true"})


REJECTED_BY_CLIENT = "Offset rejected by client."  # the broker's cause of a client's reject


@dataclass
class DeadLetters:
    found: Counter  # Source -> how many dead-letter records it has
    copied: dict[Source, tuple[int, int]]  # (producer id, sequence) of a record copied with its value
    others: int  # records of groups not the run's (a topic a user shares)
    causes: dict[Source, str] = field(default_factory=dict)  # the broker's word: rejected | archived


def read_sources(bootstrap: str, security: ClientSecurity, topic: str, groups: set[str]) -> DeadLetters:
    """What the dead-letter topic holds now for `groups`."""
    consumer = reader(bootstrap, security)
    letters = DeadLetters(Counter(), {}, 0)
    try:
        partitions = partitions_of(consumer, topic)
        for message in every_record(consumer, topic, partitions):
            pairs = cast(list[tuple[str, bytes | None]], message.headers() or [])  # the consumer's form
            headers = {k: v.decode() for k, v in pairs if k.startswith(HEADER) and v is not None}
            group = headers.get(HEADER + "group")
            if group not in groups:
                letters.others += 1
                continue
            partition, offset = int(headers[HEADER + "partition"]), int(headers[HEADER + "offset"])
            source = (group, headers[HEADER + "topic"], partition, offset)
            letters.found[source] += 1
            cause = headers.get(HEADER + "message")  # else: the delivery count ran out
            letters.causes[source] = "rejected" if cause == REJECTED_BY_CLIENT else "archived"
            if header := unpack_header(message.value()):
                letters.copied[source] = header[:2]
    finally:
        consumer.close()
    return letters


def identities(bootstrap: str, security: ClientSecurity, sources: set[Source]) -> dict[Source, tuple[int, int]]:
    """(producer id, sequence) of each source record, read from the run's topics by offset."""
    wanted: dict[tuple[str, int], set[int]] = {}
    for _group, topic, partition, offset in sources:
        wanted.setdefault((topic, partition), set()).add(offset)
    known: dict[tuple[str, int, int], tuple[int, int]] = {}
    consumer = reader(bootstrap, security)
    try:
        for (topic, partition), offsets in wanted.items():
            last = max(offsets)
            consumer.assign([TopicPartition(topic, partition, min(offsets))])
            for message in records_until(consumer, last):
                if message.topic() != topic or message.partition() != partition:
                    continue  # fetched for the partition read before
                offset = message.offset() or 0
                header = unpack_header(message.value()) if offset in offsets else None
                if header:
                    known[(topic, partition, offset)] = header[:2]
    finally:
        consumer.close()
    return {s: known[s[1:]] for s in sources if s[1:] in known}
