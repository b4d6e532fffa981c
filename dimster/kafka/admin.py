"""Admin API access through confluent-kafka, quiet while brokers come and go.

Every function takes the cluster's `security` (librdkafka properties beside bootstrap.servers, empty
for a PLAINTEXT cluster). A cluster that refuses the credentials is one error line at once
(AuthenticationFailed), not a wait until a time-out: librdkafka reports it through error_cb only."""

import logging
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from dimster.clock import Deadline
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.security import ClientSecurity

_quiet = logging.getLogger("dimster.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


class AuthenticationFailed(ClusterError):
    """The cluster refused the client's credentials (a wrong password, an unknown user)."""


class _AdminClient(AdminClient):
    authentication_refusals: list[str]  # what error_cb reported, read by wait_for()


def admin_client(bootstrap_servers: str, security: ClientSecurity = None, **config: str | int) -> AdminClient:
    refusals: list[str] = []

    def on_error(error: KafkaError) -> None:
        if error.code() == KafkaError._AUTHENTICATION:
            refusals.append(error.str())

    # librdkafka's configuration takes objects too (a logger, callbacks), not only scalars
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "logger": _quiet,
        "error_cb": on_error,
        **(security or {}),
        **config,
    }
    admin = _AdminClient(settings)
    admin.authentication_refusals = refusals
    return admin


def _raise_if_refused(admin: AdminClient) -> None:
    """AuthenticationFailed once librdkafka has reported a refusal of the credentials (error_cb)."""
    admin.poll(0)  # serves error_cb
    refusals = getattr(admin, "authentication_refusals", [])
    if refusals:
        raise AuthenticationFailed(refusals[0])


def wait_for(admin: AdminClient, future, timeout: float):
    """`future.result(timeout)`, but ended by an authentication failure as soon as librdkafka reports
    it (AuthenticationFailed); raises KafkaException and TimeoutError as the future does."""
    deadline = Deadline(timeout)
    while True:
        _raise_if_refused(admin)
        try:
            return future.result(timeout=min(0.2, deadline.left()))
        except TimeoutError:
            if deadline.passed():
                raise


def _broker_ids(bootstrap_servers: str, timeout: float, security: ClientSecurity) -> set[int]:
    """The brokers a Metadata answer lists (the registered, unfenced ones), asked in slices of half a
    second so that a refusal of the credentials ends the wait at once. Metadata of every topic: the
    Python client asks no Metadata without topics but through describe_cluster.

    Not describe_cluster: librdkafka (2.16, and its main branch) aborts the whole process when a
    DescribeCluster's Metadata answer lists no broker and no topic, as a broker answers while every
    broker it knows is fenced (a cluster's start, its own stop): rdkafka_admin.c asserts a result its
    parser did not make (`rd_kafka_admin_response_parse: Assertion 'rko_result' failed`). Metadata's
    own path retries such an answer."""
    admin = admin_client(bootstrap_servers, security, **{"socket.connection.setup.timeout.ms": int(timeout * 1000)})
    deadline = Deadline(timeout)
    while True:
        _raise_if_refused(admin)
        left = deadline.left()
        try:
            return set(admin.list_topics(timeout=max(0.05, min(0.5, left))).brokers)
        except KafkaException:
            if left <= 0.5:
                raise


def registered_brokers(bootstrap_servers: str, timeout: float = 5.0, security: ClientSecurity = None) -> set[int]:
    """Ids of the brokers the cluster reports as registered; empty when none answers. A refusal of
    the credentials raises AuthenticationFailed."""
    try:
        return _broker_ids(bootstrap_servers, timeout, security)
    except (KafkaException, RuntimeError):
        return set()


def under_replicated_partitions(
    bootstrap_servers: str, timeout: float = 10.0, security: ClientSecurity = None
) -> int | None:
    """Partitions whose in-sync replicas are fewer than their replicas; None if the cluster did not answer."""
    try:
        metadata = admin_client(bootstrap_servers, security).list_topics(timeout=timeout)
    except KafkaException:
        return None
    return sum(
        1
        for topic in metadata.topics.values()
        for partition in topic.partitions.values()
        if len(partition.isrs) < len(partition.replicas)
    )


def wait_until_partitions_serve(
    bootstrap_servers: str, partitions: dict[str, range], timeout: float, security: ClientSecurity = None
) -> bool:
    """Wait until the leader of each partition answers ListOffsets. Metadata names a new partition's
    leader before that broker serves it; an idempotent producer (the Java default) whose first batch
    is refused then can have its later batches accepted and stay stuck retrying the first one
    (OutOfOrderSequenceException). Returns whether all answered within `timeout` seconds."""
    pending = [TopicPartition(topic, p) for topic, numbers in partitions.items() for p in numbers]
    deadline = Deadline(timeout)
    while pending and not deadline.passed():
        admin = admin_client(bootstrap_servers, security)  # fresh metadata each round
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in pending}, request_timeout=5)
        waiting = []
        for tp, future in futures.items():
            try:
                wait_for(admin, future, max(0.1, deadline.left()))
            except (KafkaException, TimeoutError):
                waiting.append(tp)
        pending = waiting
        if pending:
            time.sleep(0.1)
    return not pending


def describe_brokers(bootstrap_servers: str, timeout: float = 10.0, security: ClientSecurity = None) -> list[int]:
    """Sorted ids of the cluster's brokers, as its metadata lists them.

    Raises ClusterError (one line) when no broker answers within `timeout` seconds."""
    try:
        brokers = _broker_ids(bootstrap_servers, timeout, security)
    except AuthenticationFailed as e:
        raise AuthenticationFailed(f"cluster at {bootstrap_servers} refused dimster's credentials: {e}") from None
    except (KafkaException, RuntimeError) as e:
        raise ClusterError(
            f"cluster at {bootstrap_servers} did not answer a metadata request within {timeout:.0f}s: {_reason(e)}"
        ) from None
    if not brokers:
        raise ClusterError(f"cluster at {bootstrap_servers} reports no brokers")
    return sorted(brokers)


def _reason(error: Exception) -> str:
    """A Kafka error's own one-line message, without the KafkaError(...) wrapping."""
    if isinstance(error, KafkaException) and error.args and hasattr(error.args[0], "str"):
        return error.args[0].str()
    return str(error) or type(error).__name__


def records_in_log(
    bootstrap_servers: str, partitions: dict[str, int], timeout: float = 10.0, security: ClientSecurity = None
) -> dict[str, int]:
    """Per topic of `partitions` (topic -> partition count), the records its log has taken: the sum of
    its partitions' end offsets (a topic made for one run starts at offset 0). DimsterError when a
    partition does not answer."""
    admin = admin_client(bootstrap_servers, security)
    wanted = {TopicPartition(t, p): OffsetSpec.latest() for t, count in partitions.items() for p in range(count)}
    counts = dict.fromkeys(partitions, 0)
    for tp, future in admin.list_offsets(wanted, request_timeout=timeout).items():
        try:
            counts[tp.topic] += wait_for(admin, future, timeout + 5).offset
        except (KafkaException, TimeoutError) as e:
            raise DimsterError(f"the end offset of {tp.topic}-{tp.partition} could not be read: {_reason(e)}") from None
    return counts
