"""Admin API access through confluent-kafka, quiet while brokers come and go."""

import logging
import time

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

_quiet = logging.getLogger("dimster.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


def admin_client(bootstrap_servers: str, **config: str | int) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap_servers, "logger": _quiet, **config})


def registered_brokers(bootstrap_servers: str, timeout: float = 5.0) -> set[int]:
    """Ids of the brokers the cluster reports as registered; empty when none answers."""
    try:
        admin = admin_client(bootstrap_servers, **{"socket.connection.setup.timeout.ms": int(timeout * 1000)})
        result = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 1)
        return {node.id for node in result.nodes}
    except (KafkaException, TimeoutError, RuntimeError):
        return set()


def under_replicated_partitions(bootstrap_servers: str, timeout: float = 10.0) -> int | None:
    """Partitions whose in-sync replicas are fewer than their replicas; None if the cluster did not answer."""
    try:
        metadata = admin_client(bootstrap_servers).list_topics(timeout=timeout)
    except KafkaException:
        return None
    return sum(
        1
        for topic in metadata.topics.values()
        for partition in topic.partitions.values()
        if len(partition.isrs) < len(partition.replicas)
    )


def wait_until_partitions_serve(bootstrap_servers: str, partitions: dict[str, range], timeout: float) -> bool:
    """Wait until the leader of each partition answers ListOffsets. Metadata names a new partition's
    leader before that broker serves it; an idempotent producer (the Java default) whose first batch
    is refused then can have its later batches accepted and stay stuck retrying the first one
    (OutOfOrderSequenceException). Returns whether all answered within `timeout` seconds."""
    pending = [TopicPartition(topic, p) for topic, numbers in partitions.items() for p in numbers]
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        admin = admin_client(bootstrap_servers)  # fresh metadata each round
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in pending}, request_timeout=5)
        waiting = []
        for tp, future in futures.items():
            try:
                future.result(timeout=max(0.1, deadline - time.monotonic()))
            except (KafkaException, TimeoutError):
                waiting.append(tp)
        pending = waiting
        if pending:
            time.sleep(0.1)
    return not pending
