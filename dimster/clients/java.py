"""Kafka's own Java clients behind the driver interface: `clientLibrary: java`. They run in this
process's JVM (see jvm.py) through dimster's small Java classes (dimster/kafka/java/), which take
a batch of records per call, so Python crosses into Java once per batch or poll."""

import logging
import time

import jpype
import numpy as np

from dimster.clients import REBALANCE_KINDS, STATS_INTERVAL_S, Polled, Rebalance, RefusedAcks
from dimster.kafka.properties import property_text
from dimster.metrics.client_stats import JAVA_METRICS, java_client_stats
from dimster.workload.distributor import Choice
from dimster.workload.payload import HEADER_SIZE
from dimster.yamlfile import closest

log = logging.getLogger("dimster.worker")
CHECK_BOOTSTRAP = "127.0.0.1:9"  # the property check builds clients that never need to reach a broker


def _properties(properties: dict, client_id: str | None = None) -> object:
    """A java.util.HashMap of the properties as Kafka's config parser expects them (strings)."""
    config = jpype.java.util.HashMap()
    if client_id:
        config.put("client.id", client_id)
        config.put("metrics.sample.window.ms", str(int(STATS_INTERVAL_S * 1000)))  # averages over recent seconds
    for key, value in properties.items():
        config.put(key, property_text(value))
    return config


class _Statistics:
    """Reads the client's metrics every STATS_INTERVAL_S, on the client's own thread."""

    def __init__(self, role: str, on_stats):
        self.role, self.on_stats = role, on_stats
        self.metric_of = JAVA_METRICS[role]  # column -> metric; several columns may read one metric
        self.metrics = sorted(set(self.metric_of.values()))
        self.names = jpype.JArray(jpype.JString)(self.metrics)
        self.next_at = time.monotonic() + STATS_INTERVAL_S

    def maybe_take(self, client) -> None:
        if time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + STATS_INTERVAL_S
        # one crossing into Java for the whole array: iterating it crosses once per element, and each
        # crossing waits for the GIL again, which with hundreds of client threads costs milliseconds
        by_metric = dict(zip(self.metrics, np.asarray(client.metrics(self.names)).tolist(), strict=True))
        values = {column: by_metric[metric] for column, metric in self.metric_of.items()}
        self.on_stats(java_client_stats(self.role, values, time.time()))


class JavaProducer:
    def __init__(self, properties: dict, client_id: str, topic: str, producer_id: int, bodies: list[bytes], on_stats):
        self.value_size = HEADER_SIZE + len(bodies[0])
        self.java = jpype.JClass("DimsterProducer")(
            _properties(properties, client_id), topic, producer_id, jpype.JArray(jpype.JByte, 2)(bodies)
        )
        self.statistics = _Statistics("producer", on_stats)

    def send(self, first_sequence: int, intended: list[float], choices: list[Choice]) -> tuple[np.ndarray, int]:
        intended_ns = (np.array(intended) * 1e9).astype(np.int64)
        partitions = np.fromiter((partition for _, partition in choices), np.int32, len(choices))
        keys = [key for key, _ in choices]
        java_keys = None if keys[0] is None else jpype.JArray(jpype.JByte, 2)(keys)
        handed_over = self.java.send(
            first_sequence, jpype.JArray(jpype.JLong)(intended_ns), jpype.JArray(jpype.JInt)(partitions), java_keys
        )
        return np.asarray(handed_over) / 1e9, len(intended) * self.value_size

    def serve(self) -> None:
        self.statistics.maybe_take(self.java)

    def take_acks(self) -> tuple[np.ndarray, list[int]]:
        latencies = np.asarray(self.java.takeLatenciesMicros(), dtype=np.float64)
        return latencies, np.asarray(self.java.takeFailedSequences()).tolist()

    def close(self, timeout: float) -> int:
        return int(self.java.close(int(timeout * 1000)))


class JavaConsumer:
    """A share-group member (KafkaShareConsumer) or a consumer-group member (KafkaConsumer)."""

    def __init__(self, properties: dict, client_id: str, share: bool, on_stats, verify: bool = False):
        java_class = jpype.JClass("DimsterShareConsumer" if share else "DimsterGroupConsumer")
        self.java = java_class(_properties(properties, client_id), verify)
        self.verify = verify
        self.statistics = _Statistics("share_consumer" if share else "consumer", on_stats)

    def subscribe(self, topic: str) -> None:
        self.java.subscribe(topic)

    def take_rebalances(self) -> list[Rebalance]:
        flat = np.asarray(self.java.takeRebalances()).tolist()
        return [(at / 1000, REBALANCE_KINDS[kind], count) for at, kind, count in zip(*[iter(flat)] * 3, strict=True)]

    def assigned_partitions(self) -> list[int]:
        return sorted(np.asarray(self.java.assignedPartitions()).tolist())

    def pause_only(self, paused: set[int]) -> None:
        self.java.pauseOnly(jpype.JArray(jpype.JInt)(sorted(paused)))

    def poll(self, timeout: float) -> Polled | None:
        count = self.java.poll(int(timeout * 1000))
        self.statistics.maybe_take(self.java)
        if not count:
            return None
        java = self.java
        return Polled(
            partitions=np.asarray(java.partitions),
            delivery_counts=np.asarray(java.deliveryCounts),
            headers=bytes(java.headers),
            value_bytes=int(java.valueBytes),
            offsets=np.asarray(java.offsets),
            intact=np.asarray(java.intact, dtype=bool) if self.verify else None,
        )

    def acknowledge(self, outcomes: np.ndarray) -> None:
        self.java.acknowledge(jpype.JArray(jpype.JByte)(outcomes.astype(np.int8)))

    def take_refused(self) -> RefusedAcks:
        java = self.java
        if not java.refused:  # the usual case: one field read per poll
            return RefusedAcks([])
        pairs = np.asarray(java.takeLockLapsed(), dtype=np.int64).reshape(-1, 2).tolist()
        refused = RefusedAcks([(p, o) for p, o in pairs], int(java.renewalsRefused), int(java.otherRefusals))
        java.renewalsRefused = java.otherRefusals = 0
        return refused

    def lock_timeout_ms(self) -> float | None:
        reported = int(self.java.acquisitionLockTimeoutMs())
        return None if reported < 0 else float(reported)

    def renew(self, timeout: float) -> np.ndarray:
        return np.asarray(self.java.renew(max(100, int(timeout * 1000))), dtype=bool)

    def close(self) -> None:
        try:
            self.java.commitSync()
        except jpype.JException as e:
            log.warning("committing before close: %s", e.getMessage())
        finally:
            self.java.close(30_000)  # a share consumer releases whatever it still holds


def _known_names(role: str) -> set[str]:
    return {str(name) for name in jpype.JClass("DimsterClientSupport").configNames(role)}


def _unknown_name(section: str, keys, roles: list[str]) -> str | None:
    """The first of `keys` that none of the roles' Java clients knows, as an error line."""
    known = set().union(*(_known_names(role) for role in roles))
    for key in keys:
        if key not in known:
            clients = " or ".join(role.replace("_", " ") for role in roles)
            return f"kafkaConfig.{section}: '{key}' is not a property of Kafka's Java {clients}{closest(key, known)}"
    return None


def check_common_names(roles: list[str], common: dict) -> str | None:
    """A commonConfig name must belong to at least one of the run's Java clients (another one only
    warns about it in its log)."""
    return _unknown_name("commonConfig", common, roles)


def check_properties(role: str, section: str, common: dict, properties: dict) -> str | None:
    """Kafka's Java client of `role` judges its section's names, then builds itself from commonConfig
    and the section and closes (the JVM must run, see jvm.start_jvm): the problem as one line."""
    if problem := _unknown_name(section, properties, [role]):
        return problem
    config = {"bootstrap.servers": CHECK_BOOTSTRAP, **common, **properties}
    if role != "producer":
        config.setdefault("group.id", "dimster-check")
    try:
        if role == "share_consumer":
            jpype.JClass("DimsterShareConsumer").check(_properties(config))
        else:
            jpype.JClass("DimsterClientSupport").check(role, _properties(config))
    except jpype.JException as e:
        text = str(e.getMessage())
        in_common = [k for k in common if k in text and k not in properties]
        return f"kafkaConfig.{'commonConfig' if in_common else section}: {text}"
    return None
