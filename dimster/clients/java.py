"""Kafka's own Java clients: `clientLibrary: java`. They run in this process's JVM (see jvm.py)
through dimster's small Java classes (dimster/kafka/java/), which take a batch of records per call,
so Python crosses into Java once per batch or poll. Their drivers, the check of their properties
(by the clients of each role's version), their statistics (`metrics()`) and their security (Kafka's
names): the plug dimster/client_libraries.py registers."""

import functools
import json
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import jpype
import numpy as np

from dimster.clients import REBALANCE_KINDS, STATS_INTERVAL_S, Answers, Halted, Polled, Rebalance, check_cache, jvm
from dimster.clients.properties import ROLE_SECTIONS, java_versions
from dimster.errors import DimsterError
from dimster.kafka.properties import property_text
from dimster.kafka.security import ClientSecurity, java_security
from dimster.metrics.client_stats import COLUMNS
from dimster.workload.distributor import Choice
from dimster.workload.model import Workload
from dimster.workload.payload import HEADER_SIZE
from dimster.yamlfile import closest

log = logging.getLogger("dimster.worker")
CHECK_BOOTSTRAP = "127.0.0.1:9"  # the property check builds clients that never need to reach a broker
STATUS_SHIFT = 60  # DimsterShareConsumer's answers: a record's key | its status << 60
KEY_MASK = (1 << STATUS_SHIFT) - 1


@functools.cache
def _array(element: type, dimensions: int = 1) -> type:
    """A Java array type, made once: `jpype.JArray(...)` makes the type anew at each call (3 µs), which
    a Java producer paid two or three times a pass, as often as 10,000 times a second."""
    return jpype.JArray(element, dimensions)


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
        self.names = _array(jpype.JString)(self.metrics)
        self.next_at = time.monotonic() + STATS_INTERVAL_S

    def maybe_take(self, client) -> None:
        if time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + STATS_INTERVAL_S
        # one crossing into Java for the whole array: iterating it crosses once per element, and each
        # crossing waits for the GIL again, which with hundreds of client threads costs milliseconds
        by_metric = dict(zip(self.metrics, np.asarray(client.metrics(self.names)).tolist(), strict=True))
        values = {column: by_metric[metric] for column, metric in self.metric_of.items()}
        self.on_stats(client_stats(self.role, values, time.time()))


class JavaProducer:
    def __init__(self, properties: dict, client_id: str, topic: str, producer_id: int, bodies: list[bytes], on_stats):
        self.value_size = HEADER_SIZE + len(bodies[0])
        self.java = jpype.JClass("DimsterProducer")(
            _properties(properties, client_id), topic, producer_id, _array(jpype.JByte, 2)(bodies)
        )
        self.statistics = _Statistics("producer", on_stats)

    def send(self, first_sequence: int, intended: list[float], choices: list[Choice]) -> tuple[np.ndarray, int]:
        intended_ns = (np.array(intended) * 1e9).astype(np.int64)
        partitions = np.fromiter((partition for _, partition in choices), np.int32, len(choices))
        keys = [key for key, _ in choices]
        java_keys = None if keys[0] is None else _array(jpype.JByte, 2)(keys)
        handed_over = self.java.send(
            first_sequence, _array(jpype.JLong)(intended_ns), _array(jpype.JInt)(partitions), java_keys
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
        self.ahead = False  # fetching ahead (share groups)
        self.statistics = _Statistics("share_consumer" if share else "consumer", on_stats)

    def subscribe(self, topic: str) -> None:
        self.java.subscribe(topic)

    def take_rebalances(self) -> list[Rebalance]:
        flat = np.asarray(self.java.takeRebalances()).tolist()
        return [(at / 1000, REBALANCE_KINDS[kind], count) for at, kind, count in zip(*[iter(flat)] * 3, strict=True)]

    def assigned_partitions(self) -> list[int]:
        return sorted(np.asarray(self.java.assignedPartitions()).tolist())

    def pause_only(self, paused: set[int]) -> None:
        self.java.pauseOnly(_array(jpype.JInt)(sorted(paused)))

    def poll(self, timeout: float) -> Polled | None:
        count = self.java.poll(int(timeout * 1000))
        self.statistics.maybe_take(self.java)
        return self._shown() if count else None

    def _shown(self) -> Polled:
        """The batch the Java consumer handed over last."""
        java = self.java
        return Polled(
            partitions=np.asarray(java.partitions),
            delivery_counts=np.asarray(java.deliveryCounts),
            headers=bytes(java.headers),
            value_bytes=int(java.valueBytes),
            offsets=np.asarray(java.offsets),
            intact=np.asarray(java.intact, dtype=bool) if self.verify else None,
            waited_s=float(java.waitedMs) / 1000,
        )

    def fetch_ahead(self, on: bool) -> None:
        if on != self.ahead:  # one crossing into Java per change
            self.java.fetchAhead(on)
            self.ahead = on

    def halt(self) -> Halted:
        if not self.ahead:
            return Halted()
        last_accepted = bool(self.java.stopFetchingAhead())
        unseen = self._shown() if self.java.takeFetched() > 0 else None  # 0: it brought answers only
        self.ahead = False
        return Halted(unseen, last_accepted)

    def acknowledge(self, outcomes: np.ndarray) -> None:
        self.java.acknowledge(_array(jpype.JByte)(outcomes.astype(np.int8)))

    def take_answers(self) -> Answers:
        if not self.java.answered:  # the usual case between answers: one field read per poll
            return Answers.none()
        answers = np.asarray(self.java.takeAnswers(), dtype=np.int64)
        return Answers(answers & KEY_MASK, (answers >> STATUS_SHIFT).astype(np.int8))

    def lock_timeout_ms(self) -> float | None:
        reported = int(self.java.acquisitionLockTimeoutMs())
        return None if reported < 0 else float(reported)

    def renew(self, timeout: float) -> np.ndarray:
        return np.asarray(self.java.renew(max(100, int(timeout * 1000))), dtype=np.int8)

    def close(self) -> None:
        try:
            self.java.commitSync()
        except jpype.JException as e:
            log.warning("committing before close: %s", e.getMessage())
        finally:
            self.java.close(30_000)  # a share consumer releases whatever it still holds


PRODUCER = JavaProducer
CONSUMER = JavaConsumer


def client_security(security: ClientSecurity) -> dict[str, str]:
    return java_security(security)


def prepare_process(log_file: Path, kafka_version: str, clients_version: str) -> None:
    """Start the JVM before any client needs it (it stays up for the rest of the process)."""
    jvm.start_jvm(kafka_version, log_file.with_suffix(".java.log"), clients_version)


def check(workload: Workload, roles: list[str], kafka_version: str) -> Iterator[str]:
    """The properties of `roles`, judged by Java clients of each role's version (`kafka_version`, or
    the role's clientVersion)."""
    common = workload.kafka_config.common_config  # goes to every client of the run
    sections = workload.kafka_config.model_dump(by_alias=True)
    versions = java_versions(workload, kafka_version)
    roles_of: dict[str, list[str]] = {}  # kafka-clients version -> the roles it runs
    for role in roles:
        roles_of.setdefault(versions.get(role, kafka_version), []).append(role)
    unknown_common = []  # a commonConfig name needs one of the run's Java clients to know it
    for version, version_roles in roles_of.items():
        common_problem, problem = _judged(kafka_version, version, version_roles, common, sections)
        unknown_common.append(common_problem)
        if problem:
            yield problem
    first = unknown_common[0] if unknown_common else None
    if first and all(unknown_common):
        yield first


def _judged(kafka_version: str, version: str, roles: list[str], common: dict, sections: dict) -> check_cache.Verdict:
    """check_roles by kafka-clients `version`: kept from an earlier check of the same properties, else
    in this process's JVM, or aside where it holds another version's clients (a campaign's points)."""
    own = {ROLE_SECTIONS[role]: sections[ROLE_SECTIONS[role]] for role in roles}
    name = check_cache.key(version, roles, common, own) if check_cache.cacheable(common, own) else None
    if name and (kept := check_cache.read(name)):
        return kept
    if version == kafka_version and jvm.holds(version):
        jvm.start_jvm(kafka_version)
        verdict = check_roles(roles, common, sections)
    else:
        verdict = _check_roles_aside(kafka_version, version, roles, common, sections)
    if name:
        check_cache.write(name, verdict)
    return verdict


def check_roles(roles: list[str], common: dict, sections: dict) -> check_cache.Verdict:
    """What this process's Java clients (the JVM must run) find wrong: (a commonConfig name none of
    the roles knows, the first problem of a role's properties)."""
    roles_problem = None
    for role in roles:
        if roles_problem := check_properties(role, ROLE_SECTIONS[role], common, sections[ROLE_SECTIONS[role]]):
            break
    return check_common_names(roles, common), roles_problem


def _check_roles_aside(
    kafka_version: str, version: str, roles: list[str], common: dict, sections: dict
) -> check_cache.Verdict:
    """check_roles in a process of its own that runs kafka-clients `version` (fetched if missing;
    its progress shows on stderr)."""
    command = [sys.executable, "-m", "dimster.clients.java_check", kafka_version, version]
    request = json.dumps({"roles": roles, "common": common, "sections": sections})
    try:
        result = subprocess.run(command, input=request, stdout=subprocess.PIPE, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise DimsterError(f"the check of kafka-clients {version}'s properties did not end within 600 s") from None
    if result.returncode != 0:
        raise DimsterError(result.stdout.strip() or f"the check of kafka-clients {version} failed")
    return tuple(json.loads(result.stdout))


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


def _network(group: str) -> dict[str, str]:
    return {
        "tx_requests": f"{group}:request-total",
        "tx_bytes": f"{group}:outgoing-byte-total",
        "rx_responses": f"{group}:response-total",
        "rx_bytes": f"{group}:incoming-byte-total",
    }


def _fetches(group: str, requests_column: str) -> dict[str, str]:
    return {
        "rx_msgs": f"{group}:records-consumed-total",
        "rx_msg_bytes": f"{group}:bytes-consumed-total",
        requests_column: f"{group}:fetch-total",
        "fetch_bytes_avg": f"{group}:fetch-size-avg",
        "fetch_records_avg": f"{group}:records-per-request-avg",
    }


# Column -> "metric group:metric name" of the Java clients, per role. Names starting with "_" feed
# a derived column. The Java producer has no per-request-type counts: its requests_produce counts
# all its requests (nearly all are Produce).
JAVA_METRICS: dict[str, dict[str, str]] = {
    "producer": {
        **_network("producer-metrics"),
        "tx_msgs": "producer-metrics:record-send-total",
        "tx_msg_bytes": "producer-topic-metrics:byte-total",
        "requests_produce": "producer-metrics:request-total",
        "batch_bytes_avg": "producer-metrics:batch-size-avg",
        "request_records_avg": "producer-metrics:records-per-request-avg",
        "compression_rate_avg": "producer-metrics:compression-rate-avg",
        "queue_time_avg_ms": "producer-metrics:record-queue-time-avg",
        "request_latency_avg_ms": "producer-metrics:request-latency-avg",
        "_topic_record_rate": "producer-topic-metrics:record-send-rate",
        "_topic_byte_rate": "producer-topic-metrics:byte-rate",
    },
    "consumer": {**_network("consumer-metrics"), **_fetches("consumer-fetch-manager-metrics", "requests_fetch")},
    "share_consumer": {
        **_network("consumer-metrics"),
        **_fetches("consumer-share-fetch-manager-metrics", "requests_sharefetch"),
    },
}


def client_stats(role: str, values: dict[str, float], now: float) -> dict[str, float]:
    """From the Java metrics of `role` (JAVA_METRICS' columns to their values), at epoch `now`."""
    out: dict[str, float] = dict.fromkeys(COLUMNS, 0.0)
    out.update({column: float(value) for column, value in values.items() if not column.startswith("_")})
    out["ts_us"] = now * 1_000_000
    if role == "producer" and values.get("_topic_byte_rate"):
        # Every batch adds its size to both batch-size-avg and the topics' byte-rate, so over the same
        # window records per batch = bytes per batch * records per second / bytes per second.
        out["batch_records_avg"] = out["batch_bytes_avg"] * values["_topic_record_rate"] / values["_topic_byte_rate"]
    return out
