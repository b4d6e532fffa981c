"""The brokers' dead-letter meters (KIP-1191) as dimster scrapes them, on the session's `local` (Kafka
4.4, share.version=2): two share groups reject a known part of their records, one into a dead-letter
topic the broker can write, one into a topic that refuses the broker's writes (a compacted topic
takes no record without a key, and a dead letter that does not copy the record has none). The
broker's JMX exporter, through jmx-exporter.yaml, serves the three meters per group under dimster's
names, and broker_scrape keeps them."""

import time
import urllib.request
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from dimster.coordinator.observers.broker_scrape import parse_samples
from dimster.environment import load_environment

pytestmark = pytest.mark.kafka

RECORDS = 12
REJECTED = range(0, RECORDS, 3)  # the records each group rejects: 4 of 12
RECORDS_TOTAL = "kafka_server_share_dead_letter_records_total"
PRODUCE_TOTAL = "kafka_server_share_dead_letter_produce_requests_total"
FAILED_TOTAL = "kafka_server_share_dead_letter_failed_produce_requests_total"


def share_group_rejecting(bootstrap: str, topic: str, group: str, dead_letter_topic: str) -> None:
    """A share group with `dead_letter_topic` that reads `topic` from the start, rejects REJECTED and
    accepts the rest."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"share.auto.offset.reset": "earliest", "errors.deadletterqueue.topic.name": dead_letter_topic}
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=entries)
    [altered] = admin.incremental_alter_configs([resource]).values()
    altered.result(30)
    explicit = {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    consumer = ShareConsumer(explicit)
    consumer.subscribe([topic])
    seen: set[int] = set()
    deadline = time.monotonic() + 60
    while len(seen) < RECORDS and time.monotonic() < deadline:
        for message in consumer.poll(1.0):
            assert message.error() is None, message.error()
            number = int(message.value().split()[1])
            seen.add(number)
            consumer.acknowledge(message, AcknowledgeType.REJECT if number in REJECTED else AcknowledgeType.ACCEPT)
        consumer.commit_sync(30)
    consumer.close()
    assert seen == set(range(RECORDS))


def meters(group: str) -> dict[str, float]:
    """The dead-letter series of `group` on the session's `local`, summed over its brokers."""
    found: dict[str, float] = {}
    for url in load_environment("local").broker_metrics_urls.values():
        with urllib.request.urlopen(url, timeout=30) as answer:
            samples = parse_samples(answer.read().decode())
        for name, labels, value in samples:
            if "dead_letter" in name and labels.get("group") == group:
                found[name] = found.get(name, 0.0) + value
    return found


def test_the_brokers_dead_letter_meters_count_each_groups_dead_lettered_records_and_failed_writes(local_cluster):
    run = uuid.uuid4().hex[:8]
    topic, writable, unwritable = f"dlq-source-{run}", f"dlq.{run}-written", f"dlq.{run}-refused"
    admin = AdminClient({"bootstrap.servers": local_cluster})
    enabled = {"errors.deadletterqueue.group.enable": "true"}
    created = admin.create_topics(
        [
            NewTopic(topic, 2, 1),
            NewTopic(writable, 1, 1, config=enabled),
            NewTopic(unwritable, 1, 1, config={**enabled, "cleanup.policy": "compact"}),  # refuses null keys
        ]
    )
    for future in created.values():
        future.result(30)
    producer = Producer({"bootstrap.servers": local_cluster, "linger.ms": 0})
    for i in range(RECORDS):
        producer.produce(topic, f"record {i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    written, refused = f"dlq-written-{run}", f"dlq-refused-{run}"
    share_group_rejecting(local_cluster, topic, written, writable)
    share_group_rejecting(local_cluster, topic, refused, unwritable)

    deadline = time.monotonic() + 60  # the broker writes dead letters after the acknowledgement's answer
    while time.monotonic() < deadline:
        ok, failed = meters(written), meters(refused)
        if ok.get(RECORDS_TOTAL) == len(REJECTED) and failed.get(FAILED_TOTAL):
            break
        time.sleep(1)
    assert ok[RECORDS_TOTAL] == len(REJECTED), ok  # one dead letter per rejected record
    assert ok[PRODUCE_TOTAL] >= 1 and FAILED_TOTAL not in ok, ok  # each meter appears at its first mark
    assert failed[FAILED_TOTAL] >= 1 and failed[PRODUCE_TOTAL] >= failed[FAILED_TOTAL], failed
    assert RECORDS_TOTAL not in failed, failed  # nothing written for the group whose topic refused them
