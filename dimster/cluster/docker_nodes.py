"""The nodes of a `docker` cluster: its profile (`backend: docker`), each KRaft node's container,
volume, server.properties and the files copied into it, and the state file that records what they
were started with. docker.py runs them as a cluster and declares the backend's plug."""

import contextlib
import io
import json
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import docker
import docker.errors
from docker.models.containers import Container
from pydantic import Field

from dimster.cluster.nodes import NodeCluster, NodesProfile, new_cluster_id, save_state
from dimster.containers.daemon import (
    DAEMON_ERRORS,
    LABEL,
    api_reason,
    connect,
    daemon_address,
    label_filter,
    labels,
    stop_and_remove,
)
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.jmx_exporter import agent_jar, rules_file
from dimster.profile import share_feature_level

CONFIG_DIR = "/etc/kafka/dimster"  # where the node's server.properties (and the metrics agent) go
DATA_DIR = "/var/lib/kafka/data"  # the official image's data folder: the node's volume
INTERNAL_PORT = 19092  # the brokers and the containers of the cluster's network talk here
CLIENT_PORT = 9092  # published on the host as brokerPortBase + index
CONTROLLER_PORT = 9093
METRICS_PORT = 9404  # the JMX exporter, published as brokerMetricsPortBase + index
UNRESOLVED = re.compile(r"UnknownHostException: ([\w.-]+)")  # a name the node could not resolve


class DockerProfile(NodesProfile):
    """The `docker` backend: the nodes are containers of a Docker-compatible daemon; their client and
    metrics ports are published on `host`."""

    backend: Literal["docker"] = "docker"
    docker_host: str | None = Field(None, alias="dockerHost", min_length=3)  # default: $DOCKER_HOST, the SDK's
    image: str | None = Field(None, min_length=1)  # default: apache/kafka:<kafkaVersion>

    @property
    def kafka_image(self) -> str:
        return self.image or f"apache/kafka:{self.kafka_version}"


@dataclass
class DockerState:
    """What the running containers were started with, kept in the cluster folder."""

    kafka_version: str
    image: str
    broker_config: dict[str, str]

    @classmethod
    def load(cls, path: Path) -> "DockerState | None":
        try:
            return cls(**json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as e:
            raise ClusterError(
                f"{path} is unreadable ({type(e).__name__}: {e}): delete it and run `up` again"
            ) from None

    def save(self, path: Path) -> None:
        save_state(path, self)


class DockerNodes(NodeCluster[DockerState]):
    """What a docker cluster does to one node: its names, config file, volume and container."""

    profile: DockerProfile

    state_type = DockerState

    def __init__(self, profile: DockerProfile):
        super().__init__(profile)
        self._client: docker.DockerClient | None = None

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = connect(self.profile.docker_host)
        return self._client

    # ---- names --------------------------------------------------------------------------------
    @property
    def network_name(self) -> str:
        return f"dimster-{self.profile.name}"

    def container_name(self, index: int) -> str:
        return f"dimster-{self.profile.name}-node-{self.profile.node_ids[index]}"

    def volume_name(self, index: int) -> str:
        return f"{self.container_name(index)}-data"

    @property
    def internal_bootstrap(self) -> str:
        """What containers on the cluster's network (docker workers) connect to."""
        return ",".join(f"{self.container_name(i)}:{INTERNAL_PORT}" for i in range(self.profile.nodes))

    def _labels(self, **more: str) -> dict[str, str]:
        return labels(environment=self.profile.name, **more)

    def _ours(self, **more: str) -> dict[str, list[str]]:
        """A list filter for this environment's things (of role `role`, ...)."""
        return label_filter(environment=self.profile.name, **more)

    def containers(self) -> dict[int, Container]:
        """This environment's node containers (running or not), by node id."""
        found = self.client.containers.list(all=True, ignore_removed=True, filters=self._ours(role="broker"))
        return {int(c.labels[f"{LABEL}.node"]): c for c in found}

    # ---- configuration ------------------------------------------------------------------------
    def managed_properties(self, index: int) -> dict[str, str]:
        p = self.profile
        voters = ",".join(f"{p.node_ids[i]}@{self.container_name(i)}:{CONTROLLER_PORT}" for i in range(p.nodes))
        return {
            "process.roles": "broker,controller",
            "node.id": str(p.node_ids[index]),
            "controller.quorum.voters": voters,
            "listeners": (
                f"INTERNAL://0.0.0.0:{INTERNAL_PORT},EXTERNAL://0.0.0.0:{CLIENT_PORT},"
                f"CONTROLLER://0.0.0.0:{CONTROLLER_PORT}"
            ),
            "advertised.listeners": (
                f"INTERNAL://{self.container_name(index)}:{INTERNAL_PORT},EXTERNAL://{p.host}:{p.broker_port(index)}"
            ),
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "log.dirs": DATA_DIR,
        }

    def _config_file(self, index: int) -> Path:
        return self.root / f"node-{self.profile.node_ids[index]}" / "server.properties"

    def write_configs(self, broker_config: dict[str, str]) -> None:
        """Each node's server.properties in the cluster folder; a node's container gets a copy when created."""
        for index in range(self.profile.nodes):
            path = self._config_file(index)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.node_config_text(index, broker_config))

    # ---- containers ---------------------------------------------------------------------------
    def _image(self, progress) -> str:
        """The profile's image, pulled when the daemon lacks it; one line when it cannot be had."""
        image = self.profile.kafka_image
        try:
            self.client.images.get(image)
            return image
        except docker.errors.ImageNotFound:
            pass
        progress(f"pulling {image}")
        try:
            self.client.images.pull(image)
        except DAEMON_ERRORS as e:
            reason = api_reason(e)
            raise DimsterError(
                f"image {image} is not on the Docker daemon at {daemon_address(self.profile.docker_host)} and "
                f"could not be pulled ({reason}): pull it, or build one with `dimster image build` and set "
                f"image: dimster-kafka:{self.profile.kafka_version} in run/environments/{self.profile.name}.yaml"
            ) from None
        return image

    def _network(self) -> None:
        try:  # by its exact name: a list filtered by name matches `dimster-docker` in `dimster-dockerBeefy`
            self.client.networks.get(self.network_name)
        except docker.errors.NotFound:
            self.client.networks.create(self.network_name, labels=self._labels())

    def _cluster_id(self) -> str:
        """The id of the cluster the nodes' volumes hold; a new one when there are none."""
        for volume in self.client.volumes.list(filters=self._ours(role="data")):
            if cluster_id := volume.attrs.get("Labels", {}).get(f"{LABEL}.cluster-id"):
                return cluster_id
        return new_cluster_id()

    def _volume(self, index: int, cluster_id: str) -> str:
        name = self.volume_name(index)
        try:
            self.client.volumes.get(name)
        except docker.errors.NotFound:
            node = str(self.profile.node_ids[index])
            self.client.volumes.create(name, labels=self._labels(role="data", node=node, **{"cluster-id": cluster_id}))
        return name

    def _files(self, index: int) -> bytes:
        """A tar of what the node reads from CONFIG_DIR: its server.properties and the metrics agent.
        It ends with its end-of-archive blocks, without the padding tarfile adds to fill a record:
        podman stops reading at those blocks, and the upload of the padding after them can fail
        ("passing bulk input to subprocess: write |1: broken pipe", containers/buildah#6573)."""
        files = {"server.properties": self._config_file(index)}
        if self.profile.broker_metrics:
            files |= {"jmx_prometheus_javaagent.jar": agent_jar(), "jmx-exporter.yaml": rules_file()}
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            folder = tarfile.TarInfo(CONFIG_DIR.lstrip("/"))  # the daemon makes its parents, leaves them as they are
            folder.type, folder.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(folder)
            for name, path in files.items():
                entry = tar.gettarinfo(str(path), f"{CONFIG_DIR.lstrip('/')}/{name}")
                entry.mode, entry.uid, entry.gid, entry.uname, entry.gname = 0o644, 0, 0, "root", "root"
                with open(path, "rb") as f:
                    tar.addfile(entry, f)
            end = tar.offset + 2 * tarfile.BLOCKSIZE
        return buffer.getvalue()[:end]

    def _command(self) -> list[str]:
        """Format the volume when it is new (a JVM of its own: a restart skips it), then run Kafka."""
        properties = f"{CONFIG_DIR}/server.properties"
        share_version = share_feature_level(self.profile.kafka_version)
        return [
            "/bin/sh",
            "-c",
            f"[ -f {DATA_DIR}/meta.properties ] || "
            f'/opt/kafka/bin/kafka-storage.sh format --ignore-formatted -t "$DIMSTER_CLUSTER_ID" -c {properties} '
            f"--feature share.version={share_version} && exec /opt/kafka/bin/kafka-server-start.sh {properties}",
        ]

    def _environment(self, cluster_id: str) -> dict[str, str]:
        heap = self.profile.heap
        environment = {
            "DIMSTER_CLUSTER_ID": cluster_id,
            "KAFKA_HEAP_OPTS": f"-Xmx{heap} -Xms{heap}",
        }
        options = list(self.profile.jvm_options)
        if self.profile.broker_metrics:
            agent = f"{CONFIG_DIR}/jmx_prometheus_javaagent.jar=0.0.0.0:{METRICS_PORT}:{CONFIG_DIR}/jmx-exporter.yaml"
            options.insert(0, f"-javaagent:{agent}")
        if options:
            environment["KAFKA_OPTS"] = " ".join(options)
        return environment

    def address(self, container: Container) -> str | None:
        """The container's address on the cluster's network, if it has one."""
        networks = container.attrs.get("NetworkSettings", {}).get("Networks") or {}
        return (networks.get(self.network_name) or {}).get("IPAddress") or None

    def _start_node(self, index: int, image: str, cluster_id: str, address: str | None = None) -> Container:
        """Create node `index`'s container, copy its files in, start it. With `address`, the container
        keeps that address on the cluster's network where the daemon allows (podman does; Docker Engine
        only on a network of a configured subnet): the other nodes' connections to a recreated node's
        old address would otherwise wait out Kafka's connection set-up timeout (10 s) before they look
        its name up again, and its partitions' ISR changes wait with them."""
        p = self.profile
        ports = {f"{CLIENT_PORT}/tcp": (p.host, p.broker_port(index))}
        if p.broker_metrics:
            ports[f"{METRICS_PORT}/tcp"] = (p.host, p.broker_metrics_port(index))
        name = self.container_name(index)
        files = self._files(index)  # before the container exists: fetching the metrics agent may fail
        settings = {
            "entrypoint": self._command(),
            "command": [],
            "name": name,
            "hostname": name,
            "environment": self._environment(cluster_id),
            "labels": self._labels(role="broker", node=str(p.node_ids[index])),
            "network": self.network_name,
            "ports": ports,
            "volumes": {self._volume(index, cluster_id): {"bind": DATA_DIR, "mode": "rw"}},
        }
        container = None
        if address:
            endpoint = self.client.api.create_endpoint_config(ipv4_address=address)
            with contextlib.suppress(docker.errors.APIError):  # refused: the daemon picks an address
                container = self.client.containers.create(
                    image, networking_config={self.network_name: endpoint}, **settings
                )
        if container is None:
            container = self.client.containers.create(image, **settings)
        try:
            container.put_archive("/", files)
            container.start()
        except docker.errors.APIError as e:
            stop_and_remove([container], 0)
            raise ClusterError(f"node {p.node_ids[index]} of '{p.name}' did not start: {api_reason(e)}") from None
        except BaseException:
            stop_and_remove([container], 0)
            raise
        return container

    def check_ports_free(self, indexes: list[int] | None = None) -> None:
        # a daemon on this host; a remote one publishes on its own host and says so itself when a port is taken
        if self.client.api.base_url.startswith("http+docker://localhost"):
            super().check_ports_free(indexes)

    # ---- health -------------------------------------------------------------------------------
    def check_nodes_alive(self, node_ids: set[int]) -> None:
        for node_id, container in sorted(self.containers().items()):
            if node_id not in node_ids or container.status in ("running", "created"):
                continue
            raise ClusterError(
                f"broker node {node_id} of '{self.profile.name}' exited ({container.status}); "
                f"its log: dimster cluster logs {self.profile.name} --node {node_id}",
                detail=self._why_stopped(container),
            )

    def failure_detail(self, index: int) -> str:
        container = self.containers().get(self.profile.node_ids[index])
        return self._why_stopped(container) if container else ""

    def _why_stopped(self, container: Container) -> str:
        """A node's first errors (else its last lines); when it could not resolve the other nodes'
        names, the network's DNS is said to be the cause."""
        lines = self._tail(container, None)
        errors = [line for line in lines if " ERROR " in line or " FATAL " in line][:6] or lines[-12:]
        names = {self.container_name(i) for i in range(self.profile.nodes)}
        unresolved = sorted({m for line in lines for m in UNRESOLVED.findall(line)} & names)
        if unresolved:
            errors.append(
                f"the node could not resolve {', '.join(unresolved)}: the daemon's DNS on network "
                f"{self.network_name} does not answer for them (with podman, records left in "
                f"/run/containers/networks/aardvark-dns/{self.network_name} by a podman that was killed "
                "do that: `dimster cluster down`, then remove that file)"
            )
        return "\n".join(errors)

    @staticmethod
    def _tail(container: Container, lines: int | None) -> list[str]:
        """The last `lines` lines of the container's log (None: all of them)."""
        try:
            return container.logs(tail=lines or "all").decode(errors="replace").splitlines()
        except DAEMON_ERRORS:
            return []
