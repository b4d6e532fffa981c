"""Brokers run by the Strimzi operator: an environment profile of `backend: strimzi` and the resources
it stands for, a `Kafka` and its `KafkaNodePool`s (KRaft, API kafka.strimzi.io/v1), with the profile's
broker config as `spec.kafka.config`. What the operator would refuse is refused here first, one line
each, before anything is applied: a Kafka version it does not run, a property it sets itself (its
forbidden prefixes), a replication its nodes cannot hold.

The figures of the operator are those of Strimzi STRIMZI_RELEASE (its kafka-versions.yaml and
KafkaClusterSpec's forbidden prefixes)."""

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dimster.errors import DimsterError
from dimster.kafka.broker_config import derived_broker_config, load_broker_config
from dimster.kafka.properties import property_text
from dimster.kubernetes.deployment import DNS_LABEL, MANAGED, QUANTITY, KubernetesDeploy, PodResources
from dimster.profile import ProfileBase

STRIMZI_RELEASE = "1.2.0"
API_VERSION = "kafka.strimzi.io/v1"
KAFKA_VERSIONS = ("4.2.1", "4.3.0", "4.3.1")  # the versions Strimzi 1.2.0 supports
PLAIN_PORT = 9092  # the listener dimster's clients use, inside the Kubernetes cluster
# Strimzi 1.2.0, KafkaClusterSpec: properties the operator sets itself, by prefix, and the exceptions
FORBIDDEN_PREFIXES = (
    "listeners", "advertised.", "broker.", "listener.", "host.name", "port", "inter.broker.listener.name",
    "sasl.", "ssl.", "security.", "password.", "log.dir", "zookeeper.connect", "zookeeper.set.acl",
    "zookeeper.ssl", "zookeeper.clientCnxnSocket", "authorizer.", "super.user", "cruise.control.metrics.topic",
    "cruise.control.metrics.reporter.bootstrap.servers", "node.id", "process.roles", "controller.",
    "metadata.log.dir", "zookeeper.metadata.migration.enable", "client.quota.callback.static.kafka.admin.",
    "client.quota.callback.static.produce", "client.quota.callback.static.fetch",
    "client.quota.callback.static.storage.per.volume.limit.min.available.",
    "client.quota.callback.static.excluded.principal.name.list", "prometheus.metrics.reporter.",
    "cordoned.log.dirs",
)  # fmt: skip
FORBIDDEN_EXCEPTIONS = frozenset({
    "zookeeper.connection.timeout.ms", "sasl.server.max.receive.size", "ssl.cipher.suites", "ssl.protocol",
    "ssl.enabled.protocols", "ssl.secure.random.implementation", "cruise.control.metrics.topic.num.partitions",
    "cruise.control.metrics.topic.replication.factor", "cruise.control.metrics.topic.retention.ms",
    "cruise.control.metrics.topic.auto.create.retries", "cruise.control.metrics.topic.auto.create.timeout.ms",
    "cruise.control.metrics.topic.min.insync.replicas", "broker.session.timeout.ms", "broker.heartbeat.interval.ms",
    "controller.socket.timeout.ms", "controller.quorum.election.backoff.max.ms",
    "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
})  # fmt: skip
# properties that say how many brokers must hold a partition: none may ask more than the brokers
REPLICATION_KEYS = (
    "default.replication.factor", "min.insync.replicas", "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor", "transaction.state.log.min.isr",
    "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
)  # fmt: skip


class Storage(BaseModel):
    """Each node's volume: a claim of `size` (of `class`), or the pod's own ephemeral disk."""

    model_config = ConfigDict(extra="forbid", validate_by_name=False, validate_by_alias=True)
    type: Literal["persistent-claim", "ephemeral"] = "persistent-claim"
    size: str = Field("100Gi", pattern=QUANTITY)
    storage_class: str | None = Field(None, alias="class", min_length=1)
    delete_claim: bool = Field(True, alias="deleteClaim")  # a test cluster's data goes with it


class StrimziProfile(ProfileBase):
    """The `strimzi` backend: brokers that the Strimzi operator runs in a Kubernetes namespace."""

    backend: Literal["strimzi"] = "strimzi"
    kafka_version: str = Field(KAFKA_VERSIONS[-1], alias="kafkaVersion", pattern=r"^\d+\.\d+\.\d+$")
    namespace: str = Field("kafka", pattern=DNS_LABEL, max_length=63)
    cluster_name: str = Field("dimster", alias="clusterName", pattern=DNS_LABEL, max_length=40)
    nodes: int = Field(3, ge=1, le=100)  # brokers
    controllers: int = Field(0, ge=0, le=9)  # a pool of controllers of their own; 0: the brokers are controllers too
    storage: Storage = Field(default_factory=Storage)
    resources: PodResources = Field(default_factory=PodResources)
    heap: str | None = Field(None, pattern=r"^[0-9]+[mMgG]?$")  # each broker's -Xms and -Xmx
    kube_context: str | None = Field(None, alias="kubeContext", min_length=1)  # default: kubeconfig's current
    ready_timeout_seconds: int = Field(900, alias="readyTimeoutSeconds", ge=30)
    kubernetes: KubernetesDeploy | None = None  # the agents and coordinator as pods (`dimster k8s render`)

    @field_validator("kafka_version")
    @classmethod
    def _operator_runs_it(cls, version: str) -> str:
        if version not in KAFKA_VERSIONS:
            valid = ", ".join(KAFKA_VERSIONS)
            raise ValueError(f"'{version}' is not a Kafka version Strimzi {STRIMZI_RELEASE} runs (valid: {valid})")
        return version

    @field_validator("controllers")
    @classmethod
    def _quorum(cls, controllers: int) -> int:
        if controllers and controllers % 2 == 0:
            raise ValueError(f"{controllers} controllers: a KRaft quorum needs an odd number (1, 3, 5 ...)")
        return controllers

    @property
    def bootstrap_servers(self) -> str:
        """The plain listener's bootstrap Service, as pods of the Kubernetes cluster reach it."""
        return f"{self.cluster_name}-kafka-bootstrap.{self.namespace}.svc:{PLAIN_PORT}"


def check_config(properties: dict[str, str], profile: StrimziProfile, source: str) -> None:
    """What the operator would refuse in `spec.kafka.config`, or brokers could not hold: one line."""
    for name in properties:
        if name.startswith(FORBIDDEN_PREFIXES) and name not in FORBIDDEN_EXCEPTIONS:
            raise DimsterError(
                f"{source}: '{name}' is set by the Strimzi operator, not in spec.kafka.config "
                f"(Strimzi {STRIMZI_RELEASE} forbids it); remove it"
            )
    for name in REPLICATION_KEYS:
        value = properties.get(name)
        if value is not None and value.strip().isdigit() and int(value) > profile.nodes:
            raise DimsterError(
                f"{source}: {name}={value} needs {value} brokers; run/environments/{profile.name}.yaml "
                f"has nodes: {profile.nodes} (raise nodes, or lower {name})"
            )


def broker_properties(profile: StrimziProfile) -> dict[str, str]:
    """The profile's broker-config file with its `brokerOverrides` over it, as properties' text."""
    properties = load_broker_config(profile.broker_config_path)
    return properties | {name: property_text(value) for name, value in profile.broker_overrides.items()}


def kafka_config(properties: dict[str, str], profile: StrimziProfile) -> dict[str, Any]:
    """`spec.kafka.config`: the broker config with its values typed as YAML reads them, over what
    follows the brokers' number as on dimster's own nodes (derived_broker_config)."""
    config = derived_broker_config(profile.nodes) | properties
    return {name: _typed(value) for name, value in sorted(config.items())}


def _typed(text: str) -> int | bool | str:
    """A property's text as Strimzi's examples write it: an integer as a number, `true` and `false`
    as booleans, anything else as the text itself (a number of another form, `1e3` or `0.50`, stays as
    written: Kafka parses it, and it reads back as the same text)."""
    if text in ("true", "false"):
        return text == "true"
    return int(text) if re.fullmatch(r"-?[0-9]+", text) else text


def _pool(profile: StrimziProfile, name: str, replicas: int, roles: list[str]) -> dict[str, Any]:
    storage = profile.storage
    volume: dict[str, Any] = {"id": 0, "type": storage.type, "kraftMetadata": "shared"}
    if storage.type == "persistent-claim":
        volume |= {"size": storage.size, "deleteClaim": storage.delete_claim}
        if storage.storage_class:
            volume["class"] = storage.storage_class
    spec: dict[str, Any] = {"replicas": replicas, "roles": roles, "storage": {"type": "jbod", "volumes": [volume]}}
    resources = profile.resources.model_dump(exclude_defaults=True)
    if resources:
        spec["resources"] = resources
    if profile.heap:
        spec["jvmOptions"] = {"-Xms": profile.heap, "-Xmx": profile.heap}
    return {
        "apiVersion": API_VERSION,
        "kind": "KafkaNodePool",
        "metadata": {"name": name, "namespace": profile.namespace, "labels": _labels(profile)},
        "spec": spec,
    }


def _labels(profile: StrimziProfile) -> dict[str, str]:
    return {"strimzi.io/cluster": profile.cluster_name, **MANAGED}


def node_pools(profile: StrimziProfile) -> dict[str, tuple[int, list[str]]]:
    """Each node pool's name, replicas and roles: controllers of their own, or brokers that are both."""
    if profile.controllers:
        return {"controller": (profile.controllers, ["controller"]), "broker": (profile.nodes, ["broker"])}
    return {"dual-role": (profile.nodes, ["controller", "broker"])}


def resources(profile: StrimziProfile, properties: dict[str, str], source: str) -> list[dict[str, Any]]:
    """The node pools, then the `Kafka`, as `kubectl apply` takes them (`properties`: the broker
    config from `source`, checked here)."""
    check_config(properties, profile, source)
    pools = [_pool(profile, name, replicas, roles) for name, (replicas, roles) in node_pools(profile).items()]
    kafka = {
        "apiVersion": API_VERSION,
        "kind": "Kafka",
        "metadata": {"name": profile.cluster_name, "namespace": profile.namespace, "labels": MANAGED},
        "spec": {
            "kafka": {
                "version": profile.kafka_version,
                "listeners": [{"name": "plain", "port": PLAIN_PORT, "type": "internal", "tls": False}],
                "config": kafka_config(properties, profile),
            },
        },
    }
    return [*pools, kafka]
