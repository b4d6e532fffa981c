"""The `local` backend: KRaft nodes (broker and controller combined) as JVM processes on this host."""

import base64
import json
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from dimster.cluster.backend import ClusterStatus, NodeStatus, RedeployReport
from dimster.cluster.processes import TrackedProcess, spawn, tail
from dimster.environment import EnvironmentProfile
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.admin import registered_brokers, under_replicated_partitions
from dimster.kafka.broker_config import (
    check_names,
    check_values,
    config_definitions,
    load_broker_config,
    property_text,
)
from dimster.kafka.distribution import KafkaDistribution, kafka_distribution, run_helper
from dimster.kafka.jmx_exporter import agent_jar, agent_option
from dimster.paths import display


@dataclass
class NodeProcess:
    node_id: int
    pid: int
    started: float

    @property
    def process(self) -> TrackedProcess:
        return TrackedProcess(self.pid, self.started)


@dataclass
class ClusterState:
    """What `up` started, kept in the cluster folder so later commands can find and end it."""

    kafka_version: str
    nodes: list[NodeProcess]
    broker_config: dict[str, str]  # the broker-config properties the nodes run with

    @classmethod
    def load(cls, path: Path) -> "ClusterState | None":
        if not path.exists():
            return None
        try:
            raw = json.loads(path.read_text())
            return cls(raw["kafka_version"], [NodeProcess(**n) for n in raw["nodes"]], raw["broker_config"])
        except (ValueError, KeyError, TypeError) as e:
            raise ClusterError(
                f"{path} is unreadable ({type(e).__name__}: {e}): check with `ps` that no broker of this "
                "environment runs, then delete the file"
            ) from None

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)


class LocalCluster:
    def __init__(self, profile: EnvironmentProfile):
        self.profile = profile
        self.root = profile.cluster_dir
        self.state_file = self.root / "state.json"

    # ---- layout -------------------------------------------------------------------------------
    def node_id(self, index: int) -> int:
        return self.profile.node_ids[index]

    def node_dir(self, index: int) -> Path:
        return self.root / f"node-{self.node_id(index)}"

    def log_files(self) -> dict[int, Path]:
        """Each node's server.log, by node id."""
        return {self.node_id(i): self.node_dir(i) / "logs" / "server.log" for i in range(self.profile.nodes)}

    def _stdout_file(self, index: int) -> Path:
        return self.node_dir(index) / "logs" / "stdout.log"

    def _cluster_id(self) -> str:
        path = self.root / "cluster.id"
        if not path.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            cluster_id = "-"
            while cluster_id.startswith("-"):  # Kafka's Uuid.randomUuid avoids a leading dash too
                cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            path.write_text(cluster_id)
        return path.read_text().strip()

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
        p, n, host = self.profile, self.profile.nodes, self.profile.host
        replicas, min_isr = str(min(3, n)), str(min(2, n))
        derived = {  # follow the node count; the broker-config file may override them
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min_isr,
            "default.replication.factor": replicas,
            "group.initial.rebalance.delay.ms": "0",
        }
        managed = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id(index)),
            "controller.quorum.voters": ",".join(f"{self.node_id(i)}@{host}:{p.controller_port(i)}" for i in range(n)),
            "listeners": f"PLAINTEXT://{host}:{p.broker_port(index)},CONTROLLER://{host}:{p.controller_port(index)}",
            "advertised.listeners": f"PLAINTEXT://{host}:{p.broker_port(index)}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.node_dir(index) / "data"),
        }
        return {**derived, **broker_config, **managed}

    def _write_node_config(self, index: int, broker_config: dict[str, str], path: Path | None = None) -> Path:
        path = path or self.node_dir(index) / "server.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"{k}={v}" for k, v in sorted(self.node_properties(index, broker_config).items())]
        path.write_text(
            "# written by dimster from the environment profile and broker config\n" + "\n".join(lines) + "\n"
        )
        return path

    def _prepare_configs(self, distribution: KafkaDistribution) -> dict[str, str]:
        """Check the broker config completely (names, then Kafka's own parse), then write every node's file."""
        broker_config = self.check_broker_config(distribution)
        for index in range(self.profile.nodes):
            self._write_node_config(index, broker_config)
        return broker_config

    def check_broker_config(self, distribution: KafkaDistribution | None = None) -> dict[str, str]:
        """The broker config the profile asks for, checked by name and by Kafka's own parser; writes
        nothing the nodes read."""
        distribution = distribution or kafka_distribution(self.profile.kafka_version)
        broker_config = self.desired_broker_config(distribution)
        scratch = self.root / "check.properties"
        self._write_node_config(0, broker_config, scratch)
        try:
            check_values(scratch, distribution, display(self.profile.broker_config_path))
        finally:
            scratch.unlink(missing_ok=True)
        return broker_config

    # ---- processes ----------------------------------------------------------------------------
    def _jvm_options(self, index: int) -> tuple[str, ...]:
        log4j = resources.files("dimster.kafka") / "log4j2.properties"
        heap = self.profile.heap
        agent = ()
        if self.profile.broker_metrics:
            port = self.profile.broker_metrics_port(index)
            agent = (agent_option(agent_jar(), self.profile.host, port),)
        return (
            *agent,
            f"-Xmx{heap}",
            f"-Xms{heap}",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self.node_dir(index) / 'logs'}",
            f"-Dlog4j2.configurationFile={log4j}",
        )

    def _format_storage(self, distribution: KafkaDistribution, index: int) -> None:
        if (self.node_dir(index) / "data" / "meta.properties").exists():
            return
        command = distribution.java(
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self._cluster_id(),
            "-c",
            str(self.node_dir(index) / "server.properties"),
            "--feature",
            "share.version=1",
            jvm_options=(
                "-Xmx256m",
                f"-Dlog4j2.configurationFile={resources.files('dimster.kafka') / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.node_dir(index) / 'logs'}",
            ),
        )
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            last = (result.stdout + result.stderr).strip().splitlines()[-1:] or ["no output"]
            raise ClusterError(f"formatting storage of node {self.node_id(index)} failed: {last[0]}")

    def _check_ports_free(self) -> None:
        for index in range(self.profile.nodes):
            listeners = [
                ("client", self.profile.broker_port(index), "brokerPortBase"),
                ("controller", self.profile.controller_port(index), "controllerPortBase"),
            ]
            if self.profile.broker_metrics:
                listeners.append(("metrics", self.profile.broker_metrics_port(index), "brokerMetricsPortBase"))
            for kind, port, key in listeners:
                with socket.socket() as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    try:
                        s.bind((self.profile.host, port))
                    except OSError:
                        node = self.node_id(index)
                        raise ClusterError(
                            f"port {port} ({kind} listener of node {node}) is in use on {self.profile.host}; "
                            f"stop what holds it or change {key} in run/environments/{self.profile.name}.yaml"
                        ) from None

    def _start_node(self, distribution: KafkaDistribution, index: int) -> NodeProcess:
        properties = self.node_dir(index) / "server.properties"
        command = distribution.java("kafka.Kafka", str(properties), jvm_options=self._jvm_options(index))
        process = spawn(command, self._stdout_file(index))
        return NodeProcess(self.node_id(index), process.pid, process.started)

    def _failure_detail(self, index: int) -> str:
        """What the node said last: its errors from server.log, and the JVM's own output."""
        server_log = self.node_dir(index) / "logs" / "server.log"
        errors = [line for line in tail(server_log, 400) if " ERROR " in line or " FATAL " in line]
        jvm = [line for line in tail(self._stdout_file(index), 6) if line.strip()]
        return "\n".join(errors[-6:] + jvm)

    def _wait_registered(self, state: ClusterState, node_ids: set[int], deadline: float) -> None:
        """Until every node in `node_ids` is registered; a node process that dies ends the wait."""
        while True:
            for node in state.nodes:
                if not node.process.alive():
                    raise ClusterError(
                        f"broker node {node.node_id} of '{self.profile.name}' exited during start-up; "
                        f"its log: {display(self.log_files()[node.node_id])}",
                        detail=self._failure_detail(self.profile.node_index(node.node_id)),
                    )
            if node_ids <= registered_brokers(self.profile.bootstrap_servers):
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"'{self.profile.name}' brokers {sorted(node_ids)} did not register within "
                    f"{self.profile.start_timeout_seconds}s (startTimeoutSeconds)",
                    detail=self._failure_detail(0),
                )
            time.sleep(0.5)

    def _wait_share_groups(self, distribution: KafkaDistribution) -> None:
        result = run_helper(distribution, "share-health", self.profile.bootstrap_servers)
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

    def _wait_replicas_in_sync(self, deadline: float, progress) -> None:
        while True:
            urp = under_replicated_partitions(self.profile.bootstrap_servers)
            if urp == 0:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"{urp} partitions of '{self.profile.name}' stayed under-replicated")
            progress(f"  waiting for {urp if urp is not None else '?'} under-replicated partitions to recover")
            time.sleep(2)

    # ---- the backend interface -----------------------------------------------------------------
    def _live_state(self, progress) -> ClusterState | None:
        """The recorded state when all its processes run; a stale state is cleaned away."""
        state = ClusterState.load(self.state_file)
        if state is None:
            return None
        alive = [n for n in state.nodes if n.process.alive()]
        if len(alive) == len(state.nodes) and [n.node_id for n in state.nodes] == self.profile.node_ids:
            return state
        progress(f"stale state for '{self.profile.name}' ({len(alive)}/{len(state.nodes)} nodes alive): cleaning up")
        for node in alive:
            node.process.stop()
        self.state_file.unlink()
        return None

    def up(self, progress=print) -> ClusterStatus:
        distribution = kafka_distribution(self.profile.kafka_version)
        state = self._live_state(progress)
        if state is not None:
            deadline = time.monotonic() + self.profile.start_timeout_seconds
            self._wait_registered(state, {n.node_id for n in state.nodes}, deadline)
            progress(f"'{self.profile.name}' is already running (Kafka {state.kafka_version}): reusing it")
            return self.status()
        broker_config = self._prepare_configs(distribution)
        self._check_ports_free()
        for index in range(self.profile.nodes):
            self._format_storage(distribution, index)
        progress(f"starting {self.profile.nodes} Kafka {distribution.version} node(s) of '{self.profile.name}'")
        state = ClusterState(distribution.version, [], broker_config)
        try:
            for index in range(self.profile.nodes):
                state.nodes.append(self._start_node(distribution, index))
                state.save(self.state_file)
            deadline = time.monotonic() + self.profile.start_timeout_seconds
            self._wait_registered(state, {n.node_id for n in state.nodes}, deadline)
            self._wait_share_groups(distribution)
        except BaseException:
            for node in state.nodes:
                node.process.stop(timeout=10)
            self.state_file.unlink(missing_ok=True)
            raise
        return self.status()

    def ensure(self, progress=print) -> None:
        """Running with the profile's broker config: started, or redeployed where it differs."""
        if self.status().healthy:
            self.redeploy(progress)
        else:
            self.up(progress)

    def down(self, progress=print) -> list[int]:
        state = ClusterState.load(self.state_file)
        if state is None:
            return []
        running = [n for n in state.nodes if n.process.alive()]
        for node in running:  # all at once: a lone survivor would wait for a quorum that is gone
            node.process.stop_begin()
        for node in running:
            node.process.stop()
            progress(f"node {node.node_id} (pid {node.pid}) stopped")
        self.state_file.unlink()
        return [n.pid for n in running]

    def status(self) -> ClusterStatus:
        state = ClusterState.load(self.state_file)
        processes = {n.node_id: n for n in state.nodes} if state else {}
        alive = {i: p.process.alive() for i, p in processes.items()}
        registered = registered_brokers(self.profile.bootstrap_servers) if any(alive.values()) else set()
        log_files = self.log_files()
        nodes = [
            NodeStatus(
                node_id=node_id,
                pid=processes[node_id].pid if node_id in processes else None,
                alive=alive.get(node_id, False),
                registered=node_id in registered,
                broker_port=self.profile.broker_port(i),
                controller_port=self.profile.controller_port(i),
                log_file=str(log_files[node_id]),
            )
            for i, node_id in enumerate(self.profile.node_ids)
        ]
        return ClusterStatus(
            environment=self.profile.name,
            backend="local",
            kafka_version=state.kafka_version if state else self.profile.kafka_version,
            bootstrap_servers=self.profile.bootstrap_servers,
            running=any(alive.values()),
            healthy=bool(nodes) and all(n.alive and n.registered for n in nodes),
            nodes=nodes,
        )

    def redeploy(self, progress=print) -> RedeployReport:
        """Bring the running nodes to the current broker config: dynamic keys through the Admin API,
        the rest by restarting one node at a time. Data is kept."""
        distribution = kafka_distribution(self.profile.kafka_version)
        state = self._live_state(progress)
        if state is None:
            progress(f"'{self.profile.name}' is not running: starting it with the current broker config")
            self.up(progress)
            return RedeployReport({}, {}, [])
        if state.kafka_version != distribution.version:
            raise DimsterError(
                f"'{self.profile.name}' runs Kafka {state.kafka_version} but the profile asks for "
                f"{distribution.version}; `dimster cluster down {self.profile.name}` first to change versions"
            )
        new = self._prepare_configs(distribution)  # validated before anything changes
        old = state.broker_config
        changes: dict[str, str | None] = {k: v for k, v in new.items() if old.get(k) != v}
        changes.update({k: None for k in old if k not in new})
        definitions = config_definitions(distribution)
        dynamic = {k: v for k, v in changes.items() if k in definitions and definitions[k].dynamic}
        static = {k: v for k, v in changes.items() if k not in dynamic}
        if dynamic:
            self._alter_dynamic(distribution, dynamic, definitions, state)
            for key, value in dynamic.items():
                progress(f"applied {key}={value if value is not None else '(default)'} through the Admin API")
        restarted = []
        if static:
            progress(f"restarting nodes one at a time for: {', '.join(sorted(static))}")
            restarted = self._rolling_restart(distribution, state, progress)
        state.broker_config = new
        state.save(self.state_file)
        if not changes:
            progress("broker config unchanged: nothing to do")
        return RedeployReport(dynamic, static, restarted)

    def _alter_dynamic(
        self, distribution: KafkaDistribution, changes: dict[str, str | None], definitions, state: ClusterState
    ) -> None:
        """Cluster-wide keys go to the cluster default resource, per-broker keys to every broker."""
        wanted: dict[str, dict[str, str | None]] = {}
        for key, value in changes.items():
            targets = [""] if definitions[key].update_mode == "cluster-wide" else [str(n.node_id) for n in state.nodes]
            for target in targets:
                wanted.setdefault(target, {})[key] = value
        result = run_helper(distribution, "alter-broker-configs", self.profile.bootstrap_servers, json.dumps(wanted))
        if result.returncode != 0:
            reason = (result.stdout.strip().splitlines() or ["no answer"])[-1]
            raise ClusterError(f"the Admin API refused the broker config change: {reason}")

    def _rolling_restart(self, distribution: KafkaDistribution, state: ClusterState, progress) -> list[int]:
        if self.profile.broker_metrics:
            agent_jar()  # fetched, if it must be, before a node goes down
        restarted = []
        for index, node in enumerate(state.nodes):
            progress(f"node {node.node_id}: stopping (pid {node.pid})")
            node.process.stop()
            state.nodes[index] = self._start_node(distribution, index)
            state.save(self.state_file)
            deadline = time.monotonic() + self.profile.start_timeout_seconds
            self._wait_registered(state, {node.node_id}, deadline)
            progress(f"node {node.node_id}: up again (pid {state.nodes[index].pid})")
            if self.profile.nodes > 1:
                self._wait_replicas_in_sync(deadline, progress)
            restarted.append(node.node_id)
        return restarted

    def broker_config(self) -> dict[str, str]:
        """The broker-config properties the running nodes were started or redeployed with."""
        state = ClusterState.load(self.state_file)
        return dict(state.broker_config) if state else {}

    def remove_data(self) -> None:
        """Delete the cluster folder (only when nothing runs)."""
        if ClusterState.load(self.state_file) is not None:
            raise DimsterError(f"'{self.profile.name}' is running; `dimster cluster down {self.profile.name}` first")
        shutil.rmtree(self.root, ignore_errors=True)
