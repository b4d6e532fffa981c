"""Broker properties: the YAML file users edit, checked against Kafka's own config definitions."""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dimster.errors import DimsterError
from dimster.kafka.distribution import KafkaDistribution
from dimster.kafka.helper import run_helper
from dimster.kafka.properties import property_text
from dimster.paths import display
from dimster.yamlfile import closest, load_mapping

# Keys dimster derives from the environment profile; a broker-config file may not set them.
MANAGED_KEYS = frozenset(
    {
        "process.roles",
        "node.id",
        "broker.id",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "listeners",
        "advertised.listeners",
        "controller.listener.names",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
    }
)
# Prefixed keys Kafka accepts beyond its config definitions (per-listener settings, plugin configs).
OPEN_PREFIXES = ("listener.name.",)


@dataclass(frozen=True)
class ConfigDefinition:
    type: str
    default: str | None
    valid: str | None
    update_mode: str  # read-only | per-broker | cluster-wide

    @property
    def dynamic(self) -> bool:
        return self.update_mode != "read-only"


def config_definitions(distribution: KafkaDistribution) -> dict[str, ConfigDefinition]:
    """Every broker config key of this Kafka version, read from its jars once and cached."""
    cached = distribution.home / "broker-config-definitions.json"
    if not cached.exists():
        result = run_helper(distribution, "configdefs")
        if result.returncode != 0:
            raise DimsterError(
                f"could not read Kafka {distribution.version}'s config definitions: "
                f"{result.stderr.strip().splitlines()[-1:]}"
            )
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(result.stdout.strip().splitlines()[-1])
    raw = json.loads(cached.read_text())
    return {name: ConfigDefinition(d["type"], d["default"], d["valid"], d["updateMode"]) for name, d in raw.items()}


def derived_broker_config(nodes: int) -> dict[str, str]:
    """What follows a cluster's broker count (its broker config may override each): internal topics
    and new topics on min(3, nodes) brokers, their min.insync.replicas min(2, nodes), the first
    rebalance without delay."""
    replicas, min_isr = str(min(3, nodes)), str(min(2, nodes))
    return {
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        "default.replication.factor": replicas,
        "group.initial.rebalance.delay.ms": "0",
    }


def load_broker_config(path: Path) -> dict[str, str]:
    """The broker-config YAML as flat Kafka properties (name -> text)."""
    data = load_mapping(path, "broker config")
    properties = {}
    for name, value in data.items():
        if isinstance(value, dict) or value is None:
            raise DimsterError(f"{display(path)}: key '{name}' needs a scalar value (a number, word or list)")
        properties[str(name)] = property_text(value)
    return properties


def check_names(properties: Iterable[str], definitions: dict[str, ConfigDefinition], source: str) -> None:
    """Unknown or dimster-managed keys: one line naming the key, with the closest known name."""
    for name in properties:
        if name in MANAGED_KEYS:
            raise DimsterError(f"{source}: '{name}' is set by dimster from the environment profile; remove it")
        if name not in definitions and not name.startswith(OPEN_PREFIXES):
            raise DimsterError(f"{source}: unknown broker property '{name}'{closest(name, definitions)}")


def check_values(properties_file: Path, distribution: KafkaDistribution, source: str) -> None:
    """Let Kafka's own KafkaConfig parse the node's full properties; its message names the bad value."""
    result = run_helper(distribution, "validate", str(properties_file))
    if result.returncode != 0:
        lines = result.stdout.strip().splitlines() or result.stderr.strip().splitlines() or ["rejected"]
        raise DimsterError(f"{source}: invalid broker config: {lines[-1]}")
