"""Small real-client helpers the cluster tests share: topics, producing, consuming."""

import threading
import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic


def create_topic(bootstrap: str, partitions: int, replication: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(timeout=30)
    return name


def produce_numbers(bootstrap: str, topic: str, count: int) -> None:
    """Values '0'..'count-1', keyed so they spread over partitions; every one acknowledged (acks=all)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failures = []
    for i in range(count):
        producer.produce(
            topic, str(i).encode(), key=str(i).encode(), on_delivery=lambda err, _msg: err and failures.append(err)
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failures, failures[:3]


def consume_group(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                assert not message.error(), message.error()
                values.append(message.value())
    finally:
        consumer.close()
    return values


def broker_config(bootstrap: str, broker: int, key: str) -> str:
    """The value broker `broker` runs `key` with, as the Admin API describes it."""
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_configs([resource]).values()
    return future.result(timeout=30)[key].value


def share_group_from_earliest(bootstrap: str, group: str, configs: dict[str, str] | None = None) -> None:
    """Share groups start at the latest offset by default; these tests read what is already there.
    `configs`: more of the group's configs."""
    entries = {"share.auto.offset.reset": "earliest", **(configs or {})}
    sets = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in entries.items()]
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=sets)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def consume_share_group(
    bootstrap: str,
    topic: str,
    consumers: int,
    expected: int,
    timeout: float = 90,
    while_running: Callable[[str], object] | None = None,
):
    """Run `consumers` ShareConsumers (implicit acks) until `expected` records arrived and a quiet
    second followed; returns (all values in arrival order, records per consumer). `while_running` is
    called with the group's name after the records arrived, while every consumer is still a member."""
    group = f"sg-{uuid.uuid4().hex[:8]}"
    share_group_from_earliest(bootstrap, group)
    values: list[bytes] = []
    per_consumer = [0] * consumers
    lock = threading.Lock()
    done = threading.Event()
    errors = []

    def run(index: int) -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            consumer.subscribe([topic])
            while not done.is_set():
                for message in consumer.poll(0.5) or []:
                    if message.error():
                        errors.append(message.error())
                        continue
                    with lock:
                        values.append(message.value())
                        per_consumer[index] += 1
        finally:
            consumer.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    while len(values) < expected and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # a duplicate delivery would show up here
    try:
        if while_running:
            while_running(group)
    finally:
        done.set()
    for thread in threads:
        thread.join(30)
    assert not errors, errors[:3]
    return values, per_consumer
