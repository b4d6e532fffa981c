"""The nodes of a `local` cluster: its profile (`backend: local`), each KRaft node's folder,
server.properties and SASL_SSL material, its storage format and JVM process, and the state file
that records them. local.py runs them as a cluster and declares the backend's plug."""

import ipaddress
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from dimster.cluster.netns import NodeNetwork, subnet_addresses
from dimster.cluster.nodes import NodeCluster, NodesProfile, new_cluster_id, save_state
from dimster.cluster.tls import (
    Security,
    TlsMaterial,
    make_tls_material,
    refuses_password,
    scram_credential_argument,
    tls_material,
)
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.class_sharing import broker_shared_classes, shared_classes
from dimster.kafka.distribution import KafkaDistribution
from dimster.kafka.jmx_exporter import agent_jar, agent_option
from dimster.paths import display, project_dir
from dimster.processes import TrackedProcess, spawn, tail
from dimster.profile import share_feature_level

BROKER_PASSWORD_ENV = "DIMSTER_BROKER_PASSWORD"  # set in a secure broker's environment only
ENV_CONFIG_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"


class LocalProfile(NodesProfile):
    """The `local` backend: the nodes are JVM processes on this host."""

    backend: Literal["local"] = "local"
    controller_port_base: int = Field(19192, alias="controllerPortBase", ge=1024, le=65000)
    data_dir: str | None = Field(None, alias="dataDir")
    security: Security | None = None  # SASL_SSL listeners with a SCRAM user; None: PLAINTEXT
    # each node in a network namespace of its own on this private IPv4 subnet (needs root), so that
    # `cluster isolate` can cut it off; this host takes the subnet's first address, node i the (i+2)nd
    node_network: str | None = Field(None, alias="nodeNetwork")

    @field_validator("node_network")
    @classmethod
    def _private_subnet(cls, subnet: str | None) -> str | None:
        if subnet is None:
            return None
        try:
            network = ipaddress.IPv4Network(subnet)
        except ValueError:
            raise ValueError(f"'{subnet}' is not an IPv4 subnet such as 10.213.7.0/24") from None
        if not network.is_private or network.is_loopback or network.num_addresses < 16:
            raise ValueError(f"'{subnet}' must be a private IPv4 subnet of 16 addresses or more, such as 10.213.7.0/24")
        return str(network)

    def node_host(self, node_index: int) -> str:
        if not self.node_network:
            return self.host
        return subnet_addresses(self.node_network, node_index + 1)[1][node_index]

    @property
    def cluster_dir(self) -> Path:
        if self.data_dir:
            path = Path(self.data_dir).expanduser()
            return path if path.is_absolute() else project_dir() / path
        return super().cluster_dir

    def controller_port(self, node_index: int) -> int:
        return self.controller_port_base + node_index

    @property
    def default_metrics_port_base(self) -> int:
        return self.controller_port_base + 10


@dataclass
class NodeProcess:
    node_id: int
    pid: int
    started: float
    kafka_version: str | None = None  # the version it runs (None in older records: the cluster's)

    @property
    def process(self) -> TrackedProcess:
        return TrackedProcess(self.pid, self.started)


@dataclass
class ClusterState:
    """What `up` started, kept in the cluster folder so later commands can find and end it."""

    kafka_version: str  # every node's, or the one an upgrade rolls from until its last node is done
    nodes: list[NodeProcess]
    broker_config: dict[str, str]  # the broker-config properties the nodes run with
    isolated: dict[int, str] = field(default_factory=dict)  # node id -> isolated from `nodes` or `all`

    def node_version(self, index: int) -> str:
        """The Kafka version node `index` runs: the cluster's, or another while an upgrade rolls."""
        return self.nodes[index].kafka_version or self.kafka_version

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


class LocalNodes(NodeCluster[ClusterState]):
    """What a local cluster does to one node: its folder, config, security material and process."""

    profile: LocalProfile

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
        agent: tuple[str, ...] = ()
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
            *self.profile.jvm_options,
        )

    def _format_storage(self, distribution: KafkaDistribution, index: int) -> None:
        if (self.node_dir(index) / "data" / "meta.properties").exists():
            return
        command, argfile = self.format_command(distribution, index)
        environment = {**os.environ, **self._broker_environment()}
        result = subprocess.run(command, input=argfile, capture_output=True, text=True, env=environment)
        if result.returncode != 0:
            last = (result.stdout + result.stderr).strip().splitlines()[-1:] or ["no output"]
            raise ClusterError(f"formatting storage of node {self.node_id(index)} failed: {last[0]}")

    def format_command(self, distribution: KafkaDistribution, index: int) -> tuple[list[str], str]:
        """`kafka-storage format` as a command line and the text of its standard input: the tool and its
        arguments come through java's `@argfile` from the pipe, so the SCRAM user's salted password (as
        good as the password to log in with) is on no command line and in no file."""
        arguments = [
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self._cluster_id(),
            "-c",
            str(self.node_dir(index) / "server.properties"),
            "--feature",
            f"share.version={share_feature_level(self.profile.kafka_version)}",
            *self._scram_users(),
        ]
        jvm_options = (
            *shared_classes(distribution),
            "-Xmx256m",
            f"-Dlog4j2.configurationFile={resources.files('dimster.kafka') / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.node_dir(index) / 'logs'}",
        )
        return distribution.java("@/dev/stdin", jvm_options=jvm_options), java_argfile(arguments)

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
        own = self._jvm_options(index)
        jvm_options = (*broker_shared_classes(distribution, own), *own)
        command = distribution.java("kafka.Kafka", str(properties), jvm_options=jvm_options)
        if self.network:
            command = self.network.command(index, command)
        process = spawn(command, self._stdout_file(index), env=self._broker_environment())
        return NodeProcess(self.node_id(index), process.pid, process.started, distribution.version)

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


def java_argfile(arguments: list[str]) -> str:
    """`arguments` as a java launcher's @argfile: one double-quoted argument a line (`\\`, `"` and a new
    line escaped)."""
    escaped = (a.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") for a in arguments)
    return "".join(f'"{a}"\n' for a in escaped)
