"""What each library's acknowledgement-commit callback answers, through dimster's drivers, on the
session's `local`: every acknowledgement is answered with its records' offsets (accepted and rejected
alike, in implicit mode too; at the next poll, and for the last poll at the close's commit), and one
sent after the record's lock ran out is answered as such. A share consumer counts a record as settled
on these answers (dimster/worker/clients/unsettled.py)."""

import time
import uuid

import numpy as np
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from dimster.clients import ACCEPT, LOCK_LAPSED, REJECT, SETTLED, ConsumerDriver, library, record_keys
from dimster.clients.jvm import start_jvm
from dimster.environment import DEFAULT_KAFKA_VERSION

pytestmark = pytest.mark.kafka

RECORDS = 6
LOCK_MS = 1000  # the shortest the suite's broker allows


def topic_and_group(bootstrap: str) -> tuple[str, str]:
    """A topic of 2 partitions holding RECORDS records, and a share group that reads it from the start."""
    topic, group = f"settled-{uuid.uuid4().hex[:8]}", f"settled-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    configs = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_MS)}
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=entries)
    [altered] = admin.incremental_alter_configs([resource]).values()
    altered.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(RECORDS):
        producer.produce(topic, f"record {i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    return topic, group


def share_consumer(name: str, bootstrap: str, group: str, explicit: bool) -> ConsumerDriver:
    if name == "java":
        start_jvm(DEFAULT_KAFKA_VERSION)
    properties = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        properties["share.acknowledgement.mode"] = "explicit"
    return library(name).CONSUMER(properties, f"settled-{name}", True, lambda _stats: None)


@pytest.mark.parametrize("explicit", [False, True], ids=["implicit", "explicit"])
@pytest.mark.parametrize("name", ["librdkafka", "java"])
def test_every_acknowledgement_is_answered_with_its_records(local_cluster, name, explicit):
    topic, group = topic_and_group(local_cluster)
    driver = share_consumer(name, local_cluster, group, explicit)
    driver.subscribe(topic)
    received: list[int] = []
    answered: dict[int, int] = {}  # key -> status, each key answered once
    deadline = time.monotonic() + 60
    while len(received) < RECORDS and time.monotonic() < deadline:
        polled = driver.poll(1.0)
        answers = driver.take_answers()
        assert not set(answers.keys.tolist()) & set(answered), "a record answered twice"
        answered.update(zip(answers.keys.tolist(), answers.status.tolist(), strict=True))
        if polled is not None:
            received += record_keys(polled).tolist()
            if explicit:
                driver.acknowledge(np.array([ACCEPT, REJECT] * polled.count, dtype=np.int8)[: polled.count])
    assert len(received) == RECORDS, received
    driver.close()  # commits the last poll's acknowledgements first
    answers = driver.take_answers()
    answered.update(zip(answers.keys.tolist(), answers.status.tolist(), strict=True))
    assert answered == dict.fromkeys(received, SETTLED)


@pytest.mark.parametrize("name", ["librdkafka", "java"])
def test_an_acknowledgement_after_the_lock_ran_out_is_answered_as_such(local_cluster, name):
    topic, group = topic_and_group(local_cluster)
    driver = share_consumer(name, local_cluster, group, explicit=True)
    driver.subscribe(topic)
    deadline = time.monotonic() + 60
    while (polled := driver.poll(1.0)) is None and time.monotonic() < deadline:
        pass
    assert polled is not None
    time.sleep(2.5 * LOCK_MS / 1000)
    driver.acknowledge(np.full(polled.count, ACCEPT, dtype=np.int8))
    answered: dict[int, int] = {}
    while len(answered) < polled.count and time.monotonic() < deadline:
        again = driver.poll(1.0)  # carries the acknowledgements; may bring the records back
        answers = driver.take_answers()
        for key, status in zip(answers.keys.tolist(), answers.status.tolist(), strict=True):
            # the first answer is the late one's; a redelivered copy acknowledged at once may be
            # answered in the same batch, after it
            answered.setdefault(key, status)
        if again is not None:
            driver.acknowledge(np.full(again.count, ACCEPT, dtype=np.int8))
    driver.close()
    assert {key: answered.get(key) for key in record_keys(polled).tolist()} == dict.fromkeys(
        record_keys(polled).tolist(), LOCK_LAPSED
    )
