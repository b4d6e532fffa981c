"""Kafka's Java producer behind dimster's driver (clients/java.py) writes each record as its pass asked,
whether a pass hands it one record or several: the header (producer id, sequence, intended time), the
key, the partition chosen and the body. A run's accounting reads the header back; nothing read the key
and partition a Java producer wrote."""

import time
import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from dimster.clients import library
from dimster.clients.jvm import start_jvm
from dimster.environment import DEFAULT_KAFKA_VERSION
from dimster.workload.payload import HEADER_SIZE, make_bodies, unpack_header

pytestmark = pytest.mark.kafka


def test_passes_of_one_record_and_of_several_write_each_record_as_asked(local_cluster):
    topic = f"java-passes-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": local_cluster})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(60)
    start_jvm(DEFAULT_KAFKA_VERSION)
    bodies = make_bodies(40, "RANDOM", 0)
    driver = library("java").PRODUCER({"bootstrap.servers": local_cluster}, "passes", topic, 7, bodies, lambda *_: None)
    intended = [1_000_000.0 + i * 0.001 for i in range(6)]  # epoch seconds, a millisecond apart
    choices = [(b"k0", 0), (None, 1), (b"k2", -1), (b"k3", 0), (None, 1), (b"k5", -1)]
    before = time.time()
    handed = [driver.send(i, [intended[i]], [choices[i]]) for i in range(3)]  # a pass each
    handed.append(driver.send(3, intended[3:], choices[3:]))  # one pass of three
    after = time.time()
    assert [len(times) for times, _ in handed] == [1, 1, 1, 3]
    assert [size for _, size in handed] == [40, 40, 40, 120]  # a record of 40 bytes, its header included
    assert all(before <= t <= after for times, _ in handed for t in times)  # when each was handed over
    assert driver.close(60) == 0
    acknowledged, failed = driver.take_acks()
    assert len(acknowledged) == 6 and failed == []

    consumer = Consumer({"bootstrap.servers": local_cluster, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    records = {}
    deadline = time.monotonic() + 120
    while len(records) < 6 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            producer_id, sequence, intended_ns = unpack_header(message.value())
            records[sequence] = (producer_id, intended_ns, message.key(), message.partition(), message.value())
    consumer.close()
    assert sorted(records) == list(range(6))
    for sequence, (producer_id, intended_ns, key, partition, value) in records.items():
        assert producer_id == 7 and intended_ns == int(intended[sequence] * 1e9)
        key_given, partition_given = choices[sequence]
        assert key == key_given
        if partition_given >= 0:
            assert partition == partition_given
        assert value[HEADER_SIZE:] == bodies[sequence % len(bodies)]
