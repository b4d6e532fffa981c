"""What the backends that run their own KRaft nodes share (`local` processes, `docker` containers): the
broker config each node runs with, the waits for a healthy cluster, and redeploys (dynamic keys through
the Admin API, the others by restarting one node at a time)."""

import base64
import json
import socket
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Generic, Protocol, Self, TypeVar

from pydantic import Field

from dimster.clock import Deadline
from dimster.cluster.backend import RedeployReport
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.admin import AuthenticationFailed, registered_brokers, under_replicated_partitions
from dimster.kafka.broker_config import (
    check_names,
    check_values,
    config_definitions,
    derived_broker_config,
    load_broker_config,
)
from dimster.kafka.distribution import KafkaDistribution, kafka_distribution
from dimster.kafka.helper import run_helper
from dimster.kafka.properties import property_text
from dimster.paths import display, state_dir
from dimster.profile import ProfileBase

REPLICAS_POLL_SECONDS = 0.5  # between looks at the under-replicated partitions, after a node's restart


class NodesProfile(ProfileBase):
    """A cluster dimster runs itself: `nodes` KRaft nodes (each broker and controller) with consecutive
    ids, listening for clients on consecutive ports of this host."""

    nodes: int = Field(1, ge=1, le=9)
    first_node_id: int = Field(1, alias="firstNodeId", ge=0, le=1000)
    heap: str = Field("1g", pattern=r"^\d+[mMgG]$")
    # each node's JVM options after dimster's own (GC, JIT, a flight recording), e.g. [-XX:+UseZGC]
    jvm_options: list[Annotated[str, Field(pattern=r"^-\S+$")]] = Field([], alias="jvmOptions")
    host: str = "127.0.0.1"
    broker_port_base: int = Field(19092, alias="brokerPortBase", ge=1024, le=65000)
    # brokers serve their JMX metrics for Prometheus (the JMX exporter agent) on this base + node index
    broker_metrics: bool = Field(True, alias="brokerMetrics")
    broker_metrics_port_base: int | None = Field(None, alias="brokerMetricsPortBase", ge=1024, le=65000)

    @property
    def cluster_dir(self) -> Path:
        """Configs, state and (for `local`) data and logs of this environment's nodes."""
        return state_dir() / "clusters" / self.name

    @property
    def node_ids(self) -> list[int]:
        """Kafka node ids: `nodes` consecutive ids from `firstNodeId`."""
        return [self.first_node_id + i for i in range(self.nodes)]

    def node_index(self, node_id: int) -> int:
        """Position (0-based) of `node_id` among the nodes: it picks the node's ports."""
        return node_id - self.first_node_id

    def broker_port(self, node_index: int) -> int:
        return self.broker_port_base + node_index

    def broker_metrics_port(self, node_index: int) -> int:
        return (self.broker_metrics_port_base or self.default_metrics_port_base) + node_index

    @property
    def default_metrics_port_base(self) -> int:
        return self.broker_port_base + 10

    @property
    def broker_metrics_urls(self) -> dict[int, str]:
        if not self.broker_metrics:
            return {}
        return {
            node_id: f"http://{self.node_host(i)}:{self.broker_metrics_port(i)}/metrics"
            for i, node_id in enumerate(self.node_ids)
        }

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.node_host(i)}:{self.broker_port(i)}" for i in range(self.nodes))

    def node_host(self, node_index: int) -> str:
        """The address node `node_index` listens on."""
        return self.host


def new_cluster_id() -> str:
    """A random KRaft cluster id, as `kafka-storage.sh random-uuid` makes one."""
    cluster_id = "-"
    while cluster_id.startswith("-"):  # Kafka's Uuid.randomUuid avoids a leading dash too
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    return cluster_id


def clusters_recorded_up() -> set[str]:
    """The environments of this state folder whose nodes `up` recorded and `down` has not yet removed
    (state.json in their cluster folder, cluster_dir)."""
    return {path.parent.name for path in (state_dir() / "clusters").glob("*/state.json")}


def save_state(path: Path, state) -> None:
    """Write a backend's state (a dataclass) as JSON, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2))
    tmp.replace(path)


class RecordedState(Protocol):
    """What `up` records in state.json: a backend's dataclass with load, save and broker_config."""

    broker_config: dict[str, str]

    @classmethod
    def load(cls, path: Path) -> Self | None: ...  # None when there is no record
    def save(self, path: Path) -> None: ...


State = TypeVar("State", bound=RecordedState)


class NodeCluster(Generic[State]):
    """A cluster of `profile.nodes` KRaft nodes, each broker and controller. Subclasses say how a node
    runs: its own properties (listeners, data), how it starts, stops and restarts."""

    profile: NodesProfile
    backend = ""
    state_type: type[State]  # what `up` records in state.json

    def __init__(self, profile: NodesProfile):
        self.profile = profile
        self.root = profile.cluster_dir
        self.state_file = self.root / "state.json"

    def recorded_state(self) -> State | None:
        """What `up` recorded and redeploys updated; None when there is no record."""
        return self.state_type.load(self.state_file)

    # ---- what a backend provides --------------------------------------------------------------
    def managed_properties(self, index: int) -> dict[str, str]:
        """The properties the backend owns: node id, quorum, listeners, data folder."""
        raise NotImplementedError

    def running_config(self, progress) -> tuple[str, dict[str, str]] | None:
        """The Kafka version and broker config of the running nodes; None when the cluster is not running."""
        raise NotImplementedError

    def restart_node(self, index: int, distribution: KafkaDistribution, progress) -> None:
        """Stop node `index` and start it again with its current config file; returns once it runs."""
        raise NotImplementedError

    def write_configs(self, broker_config: dict[str, str]) -> None:
        """Put every node's server.properties where the node reads it."""
        raise NotImplementedError

    def up(self, progress=print):
        raise NotImplementedError

    def status(self):
        raise NotImplementedError

    def host_ports(self, index: int) -> list[tuple[str, int, str]]:
        """(listener, port, profile key) of what node `index` listens on at the profile's host."""
        ports = [("client", self.profile.broker_port(index), "brokerPortBase")]
        if self.profile.broker_metrics:
            ports.append(("metrics", self.profile.broker_metrics_port(index), "brokerMetricsPortBase"))
        return ports

    def check_ports_free(self, indexes: list[int] | None = None) -> None:
        """One line naming the port, its node and profile key when something already holds it."""
        for index in range(self.profile.nodes) if indexes is None else indexes:
            for kind, port, key in self.host_ports(index):
                with socket.socket() as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    try:
                        s.bind((self.profile.host, port))
                    except OSError:
                        raise ClusterError(
                            f"port {port} ({kind} listener of node {self.profile.node_ids[index]}) is in use on "
                            f"{self.profile.host}; stop what holds it or change {key} in "
                            f"run/environments/{self.profile.name}.yaml"
                        ) from None

    def client_security(self) -> dict[str, str]:
        """What every client of the cluster needs beside bootstrap.servers (librdkafka's names); empty
        for PLAINTEXT listeners."""
        return {}

    def registered(self, address: str | None = None, timeout: float = 5.0) -> set[int]:
        """Ids of the brokers registered, asked at `address` (default: every node); a refusal of the
        credentials is one line naming the environment."""
        try:
            return registered_brokers(address or self.profile.bootstrap_servers, timeout, self.client_security())
        except AuthenticationFailed as e:
            raise AuthenticationFailed(f"'{self.profile.name}' refused dimster's credentials: {e}") from None

    def check_nodes_alive(self, node_ids: set[int]) -> None:
        """Raise ClusterError when one of the nodes `node_ids` has stopped (so that waits end early)."""

    def failure_detail(self, index: int) -> str:
        """What node `index` said last, for an error's detail."""
        return ""

    # ---- configuration ------------------------------------------------------------------------
    def desired_broker_config(self, distribution: KafkaDistribution) -> dict[str, str]:
        """The environment's broker-config file plus its `brokerOverrides`, names checked."""
        path = self.profile.broker_config_path
        properties = load_broker_config(path)
        check_names(properties, config_definitions(distribution), display(path))
        overrides = {k: property_text(v) for k, v in self.profile.broker_overrides.items()}
        check_names(overrides, config_definitions(distribution), f"run/environments/{self.profile.name}.yaml")
        return {**properties, **overrides}

    def node_properties(self, index: int, broker_config: dict[str, str]) -> dict[str, str]:
        derived = derived_broker_config(self.profile.nodes)  # the broker-config file may override them
        return {**derived, **broker_config, **self.managed_properties(index)}

    def node_config_text(self, index: int, broker_config: dict[str, str]) -> str:
        lines = [f"{k}={v}" for k, v in sorted(self.node_properties(index, broker_config).items())]
        return "# written by dimster from the environment profile and broker config\n" + "\n".join(lines) + "\n"

    def check_broker_config(self, distribution: KafkaDistribution | None = None) -> dict[str, str]:
        """The broker config the profile asks for, checked by name and by Kafka's own parser; writes
        nothing the nodes read."""
        distribution = distribution or kafka_distribution(self.profile.kafka_version)
        broker_config = self.desired_broker_config(distribution)
        scratch = self.root / "check.properties"
        scratch.parent.mkdir(parents=True, exist_ok=True)
        scratch.write_text(self.node_config_text(0, broker_config))
        try:
            check_values(scratch, distribution, display(self.profile.broker_config_path))
        finally:
            scratch.unlink(missing_ok=True)
        return broker_config

    def check_running_config(self, progress=print) -> None:
        """`cluster up` of a running cluster still checks the profile's broker config (a bad one is an
        error, not ignored); where it differs from what the nodes run, says how to apply it. A cluster
        `up` just started runs the profile's config: nothing to say."""
        running = self.broker_config()
        distribution = kafka_distribution(self.profile.kafka_version)
        wanted = self.desired_broker_config(distribution)
        if wanted == running:
            return
        self.check_broker_config(distribution)
        changed = sorted(k for k in {*wanted, *running} if wanted.get(k) != running.get(k))
        progress(
            f"the nodes run another broker config than the profile asks for ({', '.join(changed)}): "
            f"`dimster cluster redeploy {self.profile.name}` applies it"
        )

    def prepare_configs(self, distribution: KafkaDistribution) -> dict[str, str]:
        """Check the broker config completely (names, then Kafka's own parse), then write every node's file."""
        broker_config = self.check_broker_config(distribution)
        self.write_configs(broker_config)
        return broker_config

    # ---- waits --------------------------------------------------------------------------------
    def wait_registered(self, node_ids: set[int], deadline: Deadline) -> None:
        """Until every node in `node_ids` is registered; any node that stops ends the wait."""
        while True:
            self.check_nodes_alive(node_ids)
            if node_ids <= self.registered():
                return
            if deadline.passed():
                raise ClusterError(
                    f"'{self.profile.name}' brokers {sorted(node_ids)} did not register within "
                    f"{self.profile.start_timeout_seconds}s (startTimeoutSeconds)",
                    detail=self.failure_detail(0),
                )
            time.sleep(0.5)

    def wait_share_groups(self, distribution: KafkaDistribution) -> None:
        result = run_helper(
            distribution, "share-health", self.profile.bootstrap_servers, security=self.client_security()
        )
        try:
            health = json.loads(result.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            reason = next((line for line in result.stderr.splitlines() if "Exception" in line), "no answer")
            raise ClusterError(f"could not check share groups on '{self.profile.name}': {reason.strip()}") from None
        if health["shareVersion"] < 1 or health["shareGroupDescribe"] != "ok":
            raise ClusterError(
                f"share groups are not usable on '{self.profile.name}': share.version={health['shareVersion']}, "
                f"describe: {health['shareGroupDescribe']}"
            )

    def wait_replicas_in_sync(self, deadline: Deadline, progress) -> None:
        said: int | None = -1  # the count last said: a line when it changes
        while True:
            urp = under_replicated_partitions(self.profile.bootstrap_servers, security=self.client_security())
            if urp == 0:
                return
            if deadline.passed():
                raise ClusterError(f"{urp} partitions of '{self.profile.name}' stayed under-replicated")
            if urp != said:
                progress(f"  waiting for {urp if urp is not None else '?'} under-replicated partitions to recover")
                said = urp
            time.sleep(REPLICAS_POLL_SECONDS)

    # ---- the backend interface -----------------------------------------------------------------
    def ensure(self, progress=print) -> None:
        """Running with the profile's broker config: started, or redeployed where it differs. A
        degraded cluster gets its missing nodes back first (with the config they ran with)."""
        status = self.status()
        if status.healthy:
            self.redeploy(progress)
            return
        self.up(progress)
        if status.running:
            self.redeploy(progress)

    def broker_config(self) -> dict[str, str]:
        """The broker-config properties the running nodes were started or redeployed with."""
        state = self.recorded_state()
        return dict(state.broker_config) if state else {}

    def record_config(self, broker_config: dict[str, str]) -> None:
        """Remember `broker_config` as what the running nodes now run with."""
        state = self.recorded_state()
        if state is not None:
            state.broker_config = broker_config
            state.save(self.state_file)

    def redeploy(self, progress=print) -> RedeployReport:
        """Bring the running nodes to the current broker config: dynamic keys through the Admin API,
        the rest by restarting one node at a time. Data is kept."""
        distribution = kafka_distribution(self.profile.kafka_version)
        running = self.running_config(progress)
        if running is None:
            progress(f"'{self.profile.name}' is not running: starting it with the current broker config")
            self.up(progress)
            return RedeployReport({}, {}, [])
        version, old = running
        if version != distribution.version:
            raise DimsterError(
                f"'{self.profile.name}' runs Kafka {version} but the profile asks for "
                f"{distribution.version}; `dimster cluster down {self.profile.name}` first to change versions"
            )
        if self.desired_broker_config(distribution) == old:  # its values passed Kafka's parser when applied
            progress("broker config unchanged: nothing to do")
            return RedeployReport({}, {}, [])
        new = self.prepare_configs(distribution)  # validated before anything changes
        changes: dict[str, str | None] = {k: v for k, v in new.items() if old.get(k) != v}
        changes.update({k: None for k in old if k not in new})
        definitions = config_definitions(distribution)
        dynamic = {k: v for k, v in changes.items() if k in definitions and definitions[k].dynamic}
        static = {k: v for k, v in changes.items() if k not in dynamic}
        if dynamic:
            self._alter_dynamic(distribution, dynamic, definitions)
            for key, value in dynamic.items():
                progress(f"applied {key}={value if value is not None else '(default)'} through the Admin API")
        restarted = []
        if static:
            progress(f"restarting nodes one at a time for: {', '.join(sorted(static))}")
            restarted = self._rolling_restart(distribution, progress)
        self.record_config(new)
        return RedeployReport(dynamic, static, restarted)

    def _alter_dynamic(self, distribution: KafkaDistribution, changes: dict[str, str | None], definitions) -> None:
        """Cluster-wide keys go to the cluster default resource, per-broker keys to every broker."""
        wanted: dict[str, dict[str, str | None]] = {}
        for key, value in changes.items():
            targets = [""] if definitions[key].update_mode == "cluster-wide" else list(map(str, self.profile.node_ids))
            for target in targets:
                wanted.setdefault(target, {})[key] = value
        bootstrap, security = self.profile.bootstrap_servers, self.client_security()
        result = run_helper(distribution, "alter-broker-configs", bootstrap, json.dumps(wanted), security=security)
        if result.returncode != 0:
            reason = (result.stdout.strip().splitlines() or ["no answer"])[-1]
            raise ClusterError(f"the Admin API refused the broker config change: {reason}")

    def _rolling_restart(self, distribution: KafkaDistribution, progress) -> list[int]:
        restarted = []
        for index, node_id in enumerate(self.profile.node_ids):
            self.restart_node(index, distribution, progress)
            deadline = Deadline(self.profile.start_timeout_seconds)
            self.wait_registered({node_id}, deadline)
            progress(f"node {node_id}: up again")
            if self.profile.nodes > 1:
                self.wait_replicas_in_sync(deadline, progress)
            restarted.append(node_id)
        return restarted
