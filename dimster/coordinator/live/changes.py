"""What a live `--modify --set` changes, and whether it can change while a run goes on.

Pure functions: the coordinator validates a whole set with them before it applies anything.
"""

from dataclasses import dataclass
from typing import Any

from dimster.workload.overrides import PROPERTY_SECTIONS

# Where each changeable key takes effect. A key is matched by its dotted path or a prefix of it.
LIVE = {
    "producerRate": "rate",
    "producerRateSchedule": "rate",
    "consumerProcMsMin": "processing",
    "consumerProcMsMax": "processing",
    "consumerProcParallelism": "processing",
    "acknowledgement": "consumers",
    "consumersPaused": "pause",
    "staticMembership": "consumers",
    "flowControl": "flow-control",
    "consumerCrashes": "coordinator",
    "faults": "faults",
    "producersPerTopic": "client-count",
    "consumersPerGroup": "client-count",
    "partitionsPerTopic": "partitions",
    "messageSize": "producers",
    "payload.type": "producers",
    "payload.compressibleRatio": "producers",
    "payload.zeros": "producers",
    "payload.count": "producers",
    "messageDistributor": "producers",
    "zipfAlpha": "producers",
    "keyCount": "producers",
    "clientLibrary.producer": "producers",
    "clientLibrary.consumer": "consumers",
    "clientLibrary.shareConsumer": "consumers",
    "kafkaConfig.producerConfig": "producers",
    "kafkaConfig.consumerConfig": "consumers",
    "kafkaConfig.shareConsumerConfig": "consumers",
    "kafkaConfig.commonConfig": "all-clients",
    "kafkaConfig.topicConfig": "topic-config",
    "brokerConfig": "broker",
    "groupConfig": "group-config",
    "deadLetterQueue.enabled": "group-config",
    "deadLetterQueue.copyRecord": "group-config",
    "durationSeconds": "coordinator",
    "reportIntervalSeconds": "coordinator",
    "drainTimeoutSeconds": "coordinator",
    "warmupSeconds": "coordinator",
    "keepTopics": "coordinator",
}
REFUSED = {
    "name": "the name identifies the run and its results",
    "topics": "topics are created when a run starts; start a new run for another count",
    "replicationFactor": "replication is set when topics are created; start a new run",
    "consumerType": "a run's consumers are either share groups or consumer groups; start a new run",
    "groupsPerTopic": "groups are created when a run starts; start a new run",
    "mode": "a run's test mode is chosen when it starts; start a new run",
    "deadLetterQueue": "a run's dead-letter topic is chosen when it starts; change enabled or copyRecord live",
    "clientVersion": "each worker's JVM loads one kafka-clients version when the run starts; start a new run",
    "payload": "a payload file is read when the run starts; type, compressibleRatio, zeros and count change live",
    "thresholds": "a run is judged on the thresholds it started with; start a new run",
}


@dataclass(frozen=True)
class Change:
    key: str
    old: Any
    new: Any
    effect: str  # one of LIVE's values


def flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    """Dotted paths to leaf values; a Kafka property keeps its dots (`kafkaConfig.producerConfig.linger.ms`)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and path not in PROPERTY_SECTIONS:
            flat.update(flatten(value, path + "."))
        elif isinstance(value, dict):
            flat.update({f"{path}.{k}": v for k, v in value.items()})
        else:
            flat[path] = value
    return flat


def effect_of(key: str) -> str | None:
    for prefix, effect in LIVE.items():
        if key == prefix or key.startswith(prefix + "."):
            return effect
    return None


def live_changes(old: dict, new: dict) -> list[Change]:
    """The differences between two resolved workloads; raises ValueError for one that cannot be live."""
    before, after = flatten(old), flatten(new)
    changes = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) == after.get(key):
            continue
        root = key.split(".")[0]
        effect = effect_of(key)
        if effect is None and root in REFUSED:
            raise ValueError(f"'{key}' cannot change during a run: {REFUSED[root]}")
        if effect is None:
            raise ValueError(f"'{key}' cannot change during a run")
        if effect == "partitions" and after[key] < before[key]:
            raise ValueError(
                f"partitionsPerTopic can only grow (Kafka cannot remove partitions): {before[key]} -> {after[key]}"
            )
        changes.append(Change(key, before.get(key), after.get(key), effect))
    return changes
