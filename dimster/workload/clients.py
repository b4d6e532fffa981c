"""`clientLibrary` and `clientVersion`: which client library each role runs, and which kafka-clients
version a role's Java clients are (fetched from Maven Central)."""

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StringConstraints

from dimster.client_libraries import LIBRARIES
from dimster.workload.strict import Strict

# A client library's name: one of the registry's (pydantic reads a Literal of them)
if TYPE_CHECKING:
    Library = str
else:
    Library = Literal[tuple(LIBRARIES)]


class ClientLibrary(Strict):
    """Which client library each role runs: librdkafka (confluent-kafka) or Kafka's own Java clients
    (`java`, of the cluster's Kafka version, inside the worker process). `clientLibrary: java` sets all three."""

    producer: Library = "librdkafka"
    consumer: Library = "librdkafka"
    share_consumer: Library = Field("librdkafka", alias="shareConsumer")

    def of(self, role: str) -> Library:
        """The library of a role: producer, consumer or share_consumer."""
        return getattr(self, role)


def same_for_every_role(value):
    """`clientLibrary: java` (or `clientVersion: 2.4.0`) is short for the same value in every role."""
    return {"producer": value, "consumer": value, "shareConsumer": value} if isinstance(value, str) else value


Version = Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")]
# dimster's drivers call KafkaProducer.close(Duration) of 2.2 (KIP-367); Kafka 4 refuses < 2.1 anyway (KIP-896)
OLDEST_CLIENT = (2, 2)
OLDEST_SHARE_CLIENT = (4, 3)  # dimster's Java share consumer uses AcknowledgeType.RENEW (KIP-1222)
OLDEST_STATIC_CLIENT = (2, 3)  # group.instance.id (KIP-345)


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


class ClientVersion(Strict):
    """The kafka-clients version of each role's Java clients (fetched from Maven Central), where it
    is not the cluster's. `clientVersion: 2.4.0` sets all three."""

    producer: Version | None = None
    consumer: Version | None = None
    share_consumer: Version | None = Field(None, alias="shareConsumer")

    def of(self, role: str) -> str | None:
        return getattr(self, role)


def role_key(role: str) -> str:
    """A role's key in clientLibrary and clientVersion: producer, consumer, shareConsumer."""
    return ClientLibrary.model_fields[role].alias or role


def client_version_problem(
    roles: list[str], versions: ClientVersion, libraries: ClientLibrary, static_membership: bool
) -> str | None:
    """What is wrong with the clientVersion of the run's `roles`: a version without Java clients, or
    one older than dimster's drivers need."""
    for role in roles:
        version = versions.of(role)
        if version is None:
            continue
        key = role_key(role)
        where = f"clientVersion.{key} {version}"
        if libraries.of(role) != "java":
            return f"{where} needs clientLibrary.{key}: java (librdkafka's version is the installed confluent-kafka's)"
        oldest = OLDEST_SHARE_CLIENT if role == "share_consumer" else OLDEST_CLIENT
        why = (
            "dimster's Java share consumer renews locks (KIP-1222)"
            if role == "share_consumer"
            else "dimster's Java drivers use KafkaProducer.close(Duration) of kafka-clients 2.2 (KIP-367)"
        )
        if role == "consumer" and static_membership and oldest < OLDEST_STATIC_CLIENT:
            oldest, why = OLDEST_STATIC_CLIENT, "staticMembership needs group.instance.id (KIP-345)"
        if version_tuple(version) < oldest:
            return f"{where} is too old: {why}, so {'.'.join(map(str, oldest))}.0 or newer"
    return None
