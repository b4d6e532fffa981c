"""The `local` backend: KRaft nodes (broker and controller combined) as JVM processes on this host."""

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path

from dimster.cluster.backend import ClusterStatus, NodeStatus
from dimster.cluster.netns import NodeNetwork
from dimster.cluster.nodes import NodeCluster, new_cluster_id, save_state
from dimster.cluster.processes import TrackedProcess, spawn, tail
from dimster.cluster.tls import (
    TlsMaterial,
    make_tls_material,
    refuses_password,
    scram_credential_argument,
    tls_material,
)
from dimster.environment import LocalProfile
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.distribution import KafkaDistribution, kafka_distribution
from dimster.kafka.jmx_exporter import agent_jar, agent_option
from dimster.paths import display

BROKER_PASSWORD_ENV = "DIMSTER_BROKER_PASSWORD"  # set in a secure broker's environment only
ENV_CONFIG_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"


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
    isolated: dict[int, str] = field(default_factory=dict)  # node id -> isolated from `nodes` or `all`

    @classmethod
    def load(cls, path: Path) -> "ClusterState | None":
        if not path.exists():
            return None
        try:
            raw = json.loads(path.read_text())
            nodes = [NodeProcess(**n) for n in raw["nodes"]]
            isolated = {int(node_id): how for node_id, how in raw.get("isolated", {}).items()}
            return cls(raw["kafka_version"], nodes, raw["broker_config"], isolated)
        except (ValueError, KeyError, TypeError) as e:
            raise ClusterError(
                f"{path} is unreadable ({type(e).__name__}: {e}): check with `ps` that no broker of this "
                "environment runs, then delete the file"
            ) from None

    def save(self, path: Path) -> None:
        save_state(path, self)


ISOLATIONS = {"isolate": "nodes", "isolate-all": "all"}  # a fault's action -> from whom the node is cut off


class LocalCluster(NodeCluster):
    profile: LocalProfile
    backend = "local"

    state_type = ClusterState

    # ---- layout -------------------------------------------------------------------------------
    @cached_property
    def network(self) -> NodeNetwork | None:
        """The nodes' private network, when the profile puts each node in a namespace of its own."""
        if not self.profile.node_network:
            return None
        return NodeNetwork(self.profile.node_network, self.root, self.profile.node_ids)

    def node_id(self, index: int) -> int:
        return self.profile.node_ids[index]

    def node_dir(self, index: int) -> Path:
        return self.root / f"node-{self.node_id(index)}"

    def log_files(self) -> dict[int, Path]:
        """Each node's server.log, by node id."""
        return {self.node_id(i): self.node_dir(i) / "logs" / "server.log" for i in range(self.profile.nodes)}

    def log_lines(self, lines: int) -> dict[int, list[str]]:
        """The last `lines` lines of each node's server.log, by node id."""
        return {node_id: tail(path, lines) for node_id, path in self.log_files().items()}

    def follow_logs(self, node_ids: list[int]) -> Iterator[tuple[int, str]]:
        """New lines of the nodes' server.log files as they come, until the caller stops."""
        handles = {n: open(p, errors="replace") for n, p in self.log_files().items() if n in node_ids and p.exists()}  # noqa: SIM115
        for handle in handles.values():
            handle.seek(0, 2)
        while True:
            quiet = True
            for node_id, handle in handles.items():
                for line in handle.readlines():
                    quiet = False
                    yield node_id, line.rstrip()
            if quiet:
                time.sleep(0.5)

    def _stdout_file(self, index: int) -> Path:
        return self.node_dir(index) / "logs" / "stdout.log"

    def _cluster_id(self) -> str:
        path = self.root / "cluster.id"
        if not path.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            path.write_text(new_cluster_id())
        return path.read_text().strip()

    # ---- configuration ------------------------------------------------------------------------
    def managed_properties(self, index: int) -> dict[str, str]:
        p, n, host = self.profile, self.profile.nodes, self.profile.node_host(index)
        client = "SASL_SSL" if p.security else "PLAINTEXT"
        voters = ",".join(f"{self.node_id(i)}@{p.node_host(i)}:{p.controller_port(i)}" for i in range(n))
        properties = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id(index)),
            "controller.quorum.voters": voters,
            "listeners": f"{client}://{host}:{p.broker_port(index)},CONTROLLER://{host}:{p.controller_port(index)}",
            "advertised.listeners": f"{client}://{host}:{p.broker_port(index)}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{client}:{client}",
            "inter.broker.listener.name": client,
            "log.dirs": str(self.node_dir(index) / "data"),
        }
        return {**properties, **self._security_properties()}

    def _security_properties(self) -> dict[str, str]:
        """SASL_SSL for clients and between brokers, the KRaft quorum on PLAINTEXT. The password is no
        value here: the broker reads it from its environment through Kafka's EnvVarConfigProvider,
        so server.properties holds none. The keystore is encrypted with the user's password too."""
        security = self.profile.security
        if security is None:
            return {}
        mechanism, tls = security.mechanism, self.tls_files
        password = f"${{env:{BROKER_PASSWORD_ENV}}}"
        login = "org.apache.kafka.common.security.scram.ScramLoginModule"
        return {
            "config.providers": "env",
            "config.providers.env.class": ENV_CONFIG_PROVIDER,
            "config.providers.env.param.allowlist.pattern": f"^{BROKER_PASSWORD_ENV}$",
            "sasl.enabled.mechanisms": mechanism,
            "sasl.mechanism.inter.broker.protocol": mechanism,
            f"listener.name.sasl_ssl.{mechanism.lower()}.sasl.jaas.config": (
                f'{login} required username="{security.user}" password="{password}";'
            ),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(tls.keystore),
            "ssl.keystore.password": password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.ca_pem),
        }

    @property
    def tls_files(self) -> TlsMaterial:
        """Where a secure cluster's CA and broker keystore are (made by _make_tls_material)."""
        return tls_material(self.root / "tls")

    def _password(self) -> str:
        assert self.profile.security is not None
        return self.profile.security.password(self.profile.name)

    def _broker_environment(self) -> dict[str, str]:
        """What a secure node's process gets beside this one's environment: the password, for ${env:...}."""
        return {BROKER_PASSWORD_ENV: self._password()} if self.profile.security else {}

    def check_password(self) -> None:
        """A secure cluster's keystore and SCRAM user hold the password it was made with: nodes started
        with another could neither read the keystore nor log in to each other, and would hang until
        startTimeoutSeconds. One line instead, before any node is stopped or started."""
        security = self.profile.security
        if security is not None and refuses_password(self.tls_files.keystore, self._password()):
            name = self.profile.name
            raise DimsterError(
                f"the password in {security.password_source()} is not the one '{name}' was made with "
                f"(its keystore {display(self.tls_files.keystore)} does not open with it): give that one, "
                f"or `dimster cluster down {name} --purge` to start again with new data"
            )

    def _make_tls_material(self) -> None:
        """The CA and the broker keystore (encrypted with the user's password) for a secure cluster
        about to start: the existing ones while they still fit."""
        if self.profile.security:
            hosts = sorted({self.profile.node_host(i) for i in range(self.profile.nodes)})
            make_tls_material(self.tls_files.keystore.parent, hosts, self._password())

    def client_security(self) -> dict[str, str]:
        """What every client of this cluster needs beside bootstrap.servers (librdkafka's names)."""
        security = self.profile.security
        if security is None:
            return {}
        password = self._password()
        try:
            ca_pem = self.tls_files.ca_pem.read_text()
        except OSError:
            raise ClusterError(
                f"'{self.profile.name}' has no CA certificate yet ({display(self.tls_files.ca_pem)}): "
                f"`dimster cluster up {self.profile.name}` makes it"
            ) from None
        return security.client_properties(password, ca_pem)

    def write_configs(self, broker_config: dict[str, str]) -> None:
        for index in range(self.profile.nodes):
            path = self.node_dir(index) / "server.properties"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.node_config_text(index, broker_config))

    # ---- processes ----------------------------------------------------------------------------
    def _jvm_options(self, index: int) -> tuple[str, ...]:
        log4j = resources.files("dimster.kafka") / "log4j2.properties"
        heap = self.profile.heap
        agent = ()
        if self.profile.broker_metrics:
            port = self.profile.broker_metrics_port(index)
            agent = (agent_option(agent_jar(), self.profile.node_host(index), port),)
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
            *self._scram_users(),
            jvm_options=(
                "-Xmx256m",
                f"-Dlog4j2.configurationFile={resources.files('dimster.kafka') / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.node_dir(index) / 'logs'}",
            ),
        )
        environment = {**os.environ, **self._broker_environment()}
        result = subprocess.run(command, capture_output=True, text=True, env=environment)
        if result.returncode != 0:
            last = (result.stdout + result.stderr).strip().splitlines()[-1:] or ["no output"]
            raise ClusterError(f"formatting storage of node {self.node_id(index)} failed: {last[0]}")

    def _scram_users(self) -> tuple[str, ...]:
        """The SCRAM user, created with the metadata: a salted password, never the password itself."""
        security = self.profile.security
        if security is None:
            return ()
        return ("--add-scram", scram_credential_argument(security.user, self._password(), security.mechanism))

    def host_ports(self, index: int) -> list[tuple[str, int, str]]:
        client, *metrics = super().host_ports(index)
        return [client, ("controller", self.profile.controller_port(index), "controllerPortBase"), *metrics]

    def check_ports_free(self, indexes: list[int] | None = None) -> None:
        if not self.network:  # a namespace's ports are its own
            super().check_ports_free(indexes)

    def _start_node(self, distribution: KafkaDistribution, index: int) -> NodeProcess:
        properties = self.node_dir(index) / "server.properties"
        command = distribution.java("kafka.Kafka", str(properties), jvm_options=self._jvm_options(index))
        if self.network:
            command = self.network.command(index, command)
        process = spawn(command, self._stdout_file(index), env=self._broker_environment())
        return NodeProcess(self.node_id(index), process.pid, process.started)

    def failure_detail(self, index: int) -> str:
        """What the node said last: its errors from server.log, and the JVM's own output."""
        server_log = self.node_dir(index) / "logs" / "server.log"
        errors = [line for line in tail(server_log, 400) if " ERROR " in line or " FATAL " in line]
        jvm = [line for line in tail(self._stdout_file(index), 6) if line.strip()]
        return "\n".join(errors[-6:] + jvm)

    def check_nodes_alive(self, node_ids: set[int]) -> None:
        state = self.recorded_state()
        for node in state.nodes if state else []:
            if node.node_id in node_ids and not node.process.alive():
                raise ClusterError(
                    f"broker node {node.node_id} of '{self.profile.name}' exited during start-up; "
                    f"its log: {display(self.log_files()[node.node_id])}",
                    detail=self.failure_detail(self.profile.node_index(node.node_id)),
                )

    # ---- the backend interface -----------------------------------------------------------------
    def _recorded_nodes(self, progress) -> ClusterState | None:
        """The recorded state while at least one of its nodes runs (others may have died, or be
        paused); a record of other nodes than the profile's, or of none running, is cleaned away."""
        state = self.recorded_state()
        if state is None:
            return None
        alive = [n for n in state.nodes if n.process.alive()]
        if alive and [n.node_id for n in state.nodes] == self.profile.node_ids:
            return state
        progress(f"stale state for '{self.profile.name}' ({len(alive)}/{len(state.nodes)} nodes alive): cleaning up")
        for node in alive:
            node.process.stop()
        self.state_file.unlink(missing_ok=True)
        return None

    def up(self, progress=print) -> ClusterStatus:
        distribution = kafka_distribution(self.profile.kafka_version)
        self.check_password()
        state = self._recorded_nodes(progress)
        if state is not None:
            self._heal(state, distribution, progress)
            return self.status()
        broker_config = self.prepare_configs(distribution)
        self.check_ports_free()
        if self.network:
            self.network.create()
            self.network.apply_isolation({})
        self._make_tls_material()
        for index in range(self.profile.nodes):
            self._format_storage(distribution, index)
        progress(f"starting {self.profile.nodes} Kafka {distribution.version} node(s) of '{self.profile.name}'")
        state = ClusterState(distribution.version, [], broker_config)
        try:
            for index in range(self.profile.nodes):
                state.nodes.append(self._start_node(distribution, index))
                state.save(self.state_file)
            deadline = time.monotonic() + self.profile.start_timeout_seconds
            self.wait_registered({n.node_id for n in state.nodes}, deadline)
            self.wait_share_groups(distribution)
        except BaseException:
            for node in state.nodes:
                node.process.stop(timeout=10)
            self.state_file.unlink(missing_ok=True)
            if self.network:
                self.network.remove()
            raise
        return self.status()

    def _heal(self, state: ClusterState, distribution: KafkaDistribution, progress) -> None:
        """Bring a running cluster back to all its nodes: paused ones resume, stopped ones start again
        with their own id, data and config file; the nodes that run are left alone."""
        if state.isolated and self.network:  # (a profile that dropped nodeNetwork has no routes to undo)
            self.network.apply_isolation({})
            progress(f"nodes {sorted(state.isolated)} were isolated: rejoined them")
            state.isolated = {}
            state.save(self.state_file)
        for node in state.nodes:
            if node.process.paused():
                node.process.send(signal.SIGCONT)
                progress(f"node {node.node_id} was paused: resumed it (SIGCONT to pid {node.pid})")
        missing = [i for i, node in enumerate(state.nodes) if not node.process.alive()]
        if missing and state.kafka_version != distribution.version:
            raise DimsterError(
                f"'{self.profile.name}' runs Kafka {state.kafka_version} but the profile asks for "
                f"{distribution.version}; `dimster cluster down {self.profile.name}` first to change versions"
            )
        for index in missing:
            self._start_again(state, index, distribution)
            progress(
                f"node {self.node_id(index)} was not running: started it again with its data "
                f"(pid {state.nodes[index].pid})"
            )
        deadline = time.monotonic() + self.profile.start_timeout_seconds
        for index in missing:
            self.wait_serving(index, deadline)
        self.wait_registered({n.node_id for n in state.nodes}, deadline)
        if missing:
            kept = [n.node_id for i, n in enumerate(state.nodes) if i not in missing]
            progress(f"'{self.profile.name}' is whole again; nodes {kept} kept running")
        else:
            progress(f"'{self.profile.name}' is already running (Kafka {state.kafka_version}): reusing it")

    def _start_again(self, state: ClusterState, index: int, distribution: KafkaDistribution) -> None:
        """Start stopped node `index` on its own id, data and config file, and record it."""
        self.check_ports_free([index])
        state.nodes[index] = self._start_node(distribution, index)
        state.save(self.state_file)

    def down(self, progress=print) -> list[int]:
        state = self.recorded_state()
        if state is None:
            return []
        running = [n for n in state.nodes if n.process.alive()]
        for node in running:  # all at once: a lone survivor would wait for a quorum that is gone
            node.process.stop_begin()
        for node in running:
            node.process.stop()
            progress(f"node {node.node_id} (pid {node.pid}) stopped")
        self.state_file.unlink(missing_ok=True)
        if self.network:
            self.network.remove()
        return [n.pid for n in running]

    def status(self) -> ClusterStatus:
        state = self.recorded_state()
        processes = {n.node_id: n for n in state.nodes} if state else {}
        alive = {i: p.process.alive() for i, p in processes.items()}
        registered = self.registered() if any(alive.values()) else set()
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
                paused=node_id in processes and processes[node_id].process.paused(),
                isolated=state.isolated.get(node_id) if state else None,
            )
            for i, node_id in enumerate(self.profile.node_ids)
        ]
        return ClusterStatus(
            environment=self.profile.name,
            backend="local",
            kafka_version=state.kafka_version if state else self.profile.kafka_version,
            bootstrap_servers=self.profile.bootstrap_servers,
            running=any(alive.values()),
            healthy=bool(nodes) and all(n.alive and n.registered and not n.paused and not n.isolated for n in nodes),
            nodes=nodes,
        )

    def running_config(self, progress) -> tuple[str, dict[str, str]] | None:
        state = self._recorded_nodes(progress)
        if state is None:
            return None
        away = [n.node_id for n in state.nodes if n.process.paused() or not n.process.alive()]
        if away := sorted(set(away) | set(state.isolated)):
            raise ClusterError(
                f"nodes {away} of '{self.profile.name}' are stopped, paused or isolated: "
                f"`dimster cluster up {self.profile.name}` brings them back first"
            )
        return state.kafka_version, state.broker_config

    def restart_node(self, index: int, distribution: KafkaDistribution, progress) -> None:
        if self.profile.broker_metrics:
            agent_jar()  # fetched, if it must be, before the node goes down
        self.check_password()
        state = self.recorded_state()
        assert state is not None, "restart_node on a cluster that is not running"
        node = state.nodes[index]
        progress(f"node {node.node_id}: stopping (pid {node.pid})")
        node.process.stop()
        state.nodes[index] = self._start_node(distribution, index)
        state.save(self.state_file)
        progress(f"node {node.node_id}: started again (pid {state.nodes[index].pid})")

    def fault(self, node_id: int, action: str, progress) -> str:
        """Kill (SIGKILL), pause (SIGSTOP), resume (SIGCONT) or restart one node dimster started, found
        by its PID and start time, or `start` a stopped one alone (a killed node's heal); isolate it
        from the other nodes (or from everyone) and let it rejoin; returns what was done. A restart
        or start returns once the node itself serves."""
        state = self.recorded_state()
        if state is None:
            raise DimsterError(f"'{self.profile.name}' is not running: `dimster cluster up {self.profile.name}` first")
        if [n.node_id for n in state.nodes] != self.profile.node_ids:
            raise ClusterError(
                f"'{self.profile.name}' runs nodes {[n.node_id for n in state.nodes]}, its profile names "
                f"{self.profile.node_ids}: `dimster cluster up {self.profile.name}` first"
            )
        if action in (*ISOLATIONS, "rejoin"):
            return self._isolation(state, node_id, action)
        index = self.profile.node_index(node_id)
        node = state.nodes[index]
        if action == "start" and node.process.alive():
            raise ClusterError(f"node {node_id} of '{self.profile.name}' is running already")
        if action == "restart":
            self.restart_node(index, kafka_distribution(state.kafka_version), progress)
        elif action == "start":
            self.check_password()
            self._start_again(state, index, kafka_distribution(state.kafka_version))
        if action in ("restart", "start"):
            self.wait_serving(index, time.monotonic() + self.profile.start_timeout_seconds)
            return f"node {node_id} {action}ed (pid {self.recorded_state().nodes[index].pid})"
        if not node.process.alive():
            raise ClusterError(
                f"node {node_id} of '{self.profile.name}' is not running: "
                f"`dimster cluster up {self.profile.name}` starts it again"
            )
        paused = node.process.paused()
        if action == "kill":
            node.process.kill()
            return f"node {node_id} killed (SIGKILL to pid {node.pid})"
        if action == "pause":
            if paused:
                raise ClusterError(f"node {node_id} of '{self.profile.name}' is paused already")
            node.process.send(signal.SIGSTOP)
            return f"node {node_id} paused (SIGSTOP to pid {node.pid})"
        if not paused:
            raise ClusterError(f"node {node_id} of '{self.profile.name}' is not paused")
        node.process.send(signal.SIGCONT)
        return f"node {node_id} resumed (SIGCONT to pid {node.pid})"

    def _isolation(self, state: ClusterState, node_id: int, action: str) -> str:
        if self.network is None:
            raise DimsterError(
                f"{action}: '{self.profile.name}' has no nodeNetwork; nodes on one host's loopback cannot be cut "
                f"off from each other (give run/environments/{self.profile.name}.yaml a nodeNetwork: SUBNET)"
            )
        if action == "rejoin":
            if node_id not in state.isolated:
                raise ClusterError(f"node {node_id} of '{self.profile.name}' is not isolated")
            del state.isolated[node_id]
        elif node_id in state.isolated:
            raise ClusterError(f"node {node_id} of '{self.profile.name}' is isolated already")
        else:
            state.isolated[node_id] = ISOLATIONS[action]
        self.network.apply_isolation(state.isolated)
        state.save(self.state_file)
        if action == "rejoin":
            return f"node {node_id} rejoined the network"
        whom = "the other nodes and this host's clients" if action == "isolate-all" else "the other nodes"
        return f"node {node_id} isolated from {whom}"

    def wait_serving(self, index: int, deadline: float) -> None:
        """Until node `index` answers on its own listener and counts itself registered. Unlike
        wait_registered, a killed node's old registration (kept until the controller's session
        time-out) does not count: a broker answers requests only once the controller unfenced it."""
        node_id = self.node_id(index)
        address = f"{self.profile.node_host(index)}:{self.profile.broker_port(index)}"
        while node_id not in self.registered(address, timeout=1.5):
            self.check_nodes_alive({node_id})
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"node {node_id} of '{self.profile.name}' did not serve within "
                    f"{self.profile.start_timeout_seconds}s (startTimeoutSeconds)",
                    detail=self.failure_detail(index),
                )
            time.sleep(0.5)

    def remove_data(self) -> None:
        """Delete the cluster folder (only when nothing runs)."""
        if self.recorded_state() is not None:
            raise DimsterError(f"'{self.profile.name}' is running; `dimster cluster down {self.profile.name}` first")
        shutil.rmtree(self.root, ignore_errors=True)
