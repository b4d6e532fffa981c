"""Admin API access through confluent-kafka, quiet while brokers come and go."""

import logging
import time

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from dimster.errors import ClusterError

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


def describe_brokers(bootstrap_servers: str, timeout: float = 10.0) -> list[int]:
    """Sorted ids of the cluster's brokers, as describe cluster reports them.

    Raises ClusterError (one line) when no broker answers within `timeout` seconds."""
    try:
        admin = admin_client(bootstrap_servers, **{"socket.connection.setup.timeout.ms": int(timeout * 1000)})
        result = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 1)
    except (KafkaException, TimeoutError, RuntimeError) as e:
        raise ClusterError(
            f"cluster at {bootstrap_servers} did not answer describe cluster within {timeout:.0f}s: {_reason(e)}"
        ) from None
    if not result.nodes:
        raise ClusterError(f"cluster at {bootstrap_servers} reports no brokers")
    return sorted(node.id for node in result.nodes)


def _reason(error: Exception) -> str:
    """A Kafka error's own one-line message, without the KafkaError(...) wrapping."""
    if isinstance(error, KafkaException) and error.args and hasattr(error.args[0], "str"):
        return error.args[0].str()
    return str(error) or type(error).__name__
