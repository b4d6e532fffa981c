"""`workers: {docker: N}`: a run's worker agents (`dimster worker serve`) as N containers of dimster's
worker image, started for the run and removed at its end.

The agents and the coordinator share a token made for the run. It never reaches a file, a container's
configuration or a command line: it is written through `exec` into a tmpfs of each container, where
the agent waits for it."""

import contextlib
import secrets
import socket
import time
from collections.abc import Callable

import docker
from docker.models.containers import Container

from dimster.clock import Deadline
from dimster.cluster.backend import ClusterBackend
from dimster.cluster.docker import DockerCluster
from dimster.containers.daemon import (
    DAEMON_ERRORS,
    api_reason,
    connect,
    daemon_address,
    label_filter,
    labels,
    stop_and_remove,
)
from dimster.containers.images import worker_image
from dimster.coordinator.workers.remote import RemoteWorkers, agents_in_bundle
from dimster.errors import DimsterError
from dimster.profile import DockerWorkers, ProfileBase
from dimster.results.bundle import ResultsBundle

AGENT_PORT = 7070  # inside the container, on a cluster network
TOKEN_DIR = "/run/dimster"  # a tmpfs: the token is in memory only
READY_TIMEOUT = 90.0  # seconds an agent may take to start listening
STOP_SECONDS = 5


class WorkerContainers:
    """The run's agents as containers. With a `docker` cluster they join its network (clients use the
    brokers' internal listeners, the agents' ports are published on loopback); otherwise they share
    this host's network and reach the cluster as this host does."""

    def __init__(self, cluster: ClusterBackend, run_name: str, progress: Callable[[str], None] = print):
        profile = cluster.profile
        assert profile.docker_workers is not None
        self.profile = profile
        self.spec: DockerWorkers = profile.docker_workers  # the environment's `workers: {docker: ...}`
        self.cluster = cluster if isinstance(cluster, DockerCluster) else None  # the network they join
        self.count = self.spec.docker
        self.run_name = run_name
        self.progress = progress
        self.docker_host = self.spec.docker_host or getattr(profile, "docker_host", None)
        self.token = secrets.token_urlsafe(32)
        self.pool_id = secrets.token_hex(4)  # labels this run's containers, for removal whatever happened
        self.containers: list[Container] = []
        self._client: docker.DockerClient | None = None

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = connect(self.docker_host)
        return self._client

    @property
    def client_bootstrap(self) -> str | None:
        """What the workers' clients connect to, when it is not what this host uses."""
        return self.cluster.internal_bootstrap if self.cluster else None

    def start(self) -> list[str]:
        """Start the agents and hand each the token; their addresses once all listen."""
        try:
            image = self.spec.image or worker_image(self.client, self.profile.kafka_version, self.progress)
            self.progress(f"starting {self.count} worker agent container(s) from {image}")
            addresses = [self._start_one(index, image) for index in range(self.count)]
            for container in self.containers:
                self._give_token(container)
            for container in self.containers:
                self._wait_listening(container)
            return addresses
        except DAEMON_ERRORS as e:
            self.remove()
            address = daemon_address(self.docker_host)
            raise DimsterError(f"worker containers: the Docker daemon at {address} refused: {api_reason(e)}") from None
        except BaseException:
            self.remove()
            raise

    def _start_one(self, index: int, image: str) -> str:
        listen = f"0.0.0.0:{AGENT_PORT}" if self.cluster else f"127.0.0.1:{_free_port()}"
        token_file = f"{TOKEN_DIR}/token"
        script = (
            f"while [ ! -s {token_file} ]; do sleep 0.1; done; "
            f"exec python3 -m dimster worker serve --listen {listen} --token-file {token_file}"
        )
        options: dict = {"network_mode": "host"}
        if self.cluster:
            options = {"network": self.cluster.network_name, "ports": {f"{AGENT_PORT}/tcp": ("127.0.0.1", None)}}
        container = self.client.containers.run(
            image,
            entrypoint=["/bin/sh", "-c", script],
            command=[],
            name=f"dimster-{self.profile.name}-worker-{index}-{secrets.token_hex(3)}",
            detach=True,
            tmpfs={TOKEN_DIR: "size=64k,mode=1777"},  # the token file itself is 0600
            labels=labels(environment=self.profile.name, role="worker", run=self.run_name, pool=self.pool_id),
            **options,
        )
        self.containers.append(container)
        if not self.cluster:
            return listen
        container.reload()
        published = (container.attrs["NetworkSettings"].get("Ports") or {}).get(f"{AGENT_PORT}/tcp") or []
        if not published:
            raise DimsterError(f"worker container {container.name}: the daemon published no port for its agent")
        return f"127.0.0.1:{published[0]['HostPort']}"

    def _give_token(self, container: Container) -> None:
        """Write the token into the container's tmpfs through exec's standard input."""
        part, token = f"{TOKEN_DIR}/token.part", f"{TOKEN_DIR}/token"
        command = ["/bin/sh", "-c", f"umask 077; cat > {part} && mv {part} {token}"]
        execution = self.client.api.exec_create(container.id, command, stdin=True)
        stream = self.client.api.exec_start(execution["Id"], socket=True)
        raw = getattr(stream, "_sock", stream)
        try:
            raw.sendall(self.token.encode() + b"\n")
            raw.shutdown(socket.SHUT_WR)
            deadline = Deadline(10)
            done = self.client.api.exec_inspect(execution["Id"])
            while done.get("Running") and not deadline.passed():
                time.sleep(0.1)
                done = self.client.api.exec_inspect(execution["Id"])
        finally:
            raw.close()
        if done.get("Running") or done.get("ExitCode") != 0:
            raise DimsterError(
                f"worker container {container.name}: handing it the run's token failed "
                f"(exit code {done.get('ExitCode')}); the image must have /bin/sh, cat and mv"
            )

    def _wait_listening(self, container: Container) -> None:
        deadline = Deadline(READY_TIMEOUT)
        while not deadline.passed():
            container.reload()
            text = container.logs().decode(errors="replace")
            if " agent on " in text:
                return
            if container.status not in ("running", "created"):
                last = [line for line in text.splitlines() if line.strip()][-3:]
                raise DimsterError(f"worker container {container.name} exited: {' | '.join(last) or 'no output'}")
            time.sleep(0.3)
        raise DimsterError(f"worker container {container.name} did not listen within {READY_TIMEOUT:.0f}s")

    def remove(self) -> None:
        """Stop and remove the run's agent containers (all at once), also one whose start was cut short."""
        found = {c.id: c for c in self.containers}
        with contextlib.suppress(DimsterError, *DAEMON_ERRORS):
            listed = self.client.containers.list(all=True, ignore_removed=True, filters=label_filter(pool=self.pool_id))
            found |= {c.id: c for c in listed}
        stop_and_remove(list(found.values()), STOP_SECONDS)
        self.containers = []


class ContainerLauncher:
    """`workers: {docker: N}`: N agent containers, started once the cluster is up (they may join its
    network) and removed after the run."""

    def __init__(self, profile: ProfileBase, progress: Callable[[str], None] = print):
        assert isinstance(profile.workers, DockerWorkers)
        self.profile = profile
        self.progress = progress
        self.count = profile.workers.docker
        self.containers: WorkerContainers | None = None
        self.agents: RemoteWorkers | None = None
        self.client_bootstrap: str | None = None

    @staticmethod
    def takes(workers: object) -> bool:
        return isinstance(workers, DockerWorkers)

    def check_client_versions(self, versions: dict[str, str]) -> None:
        if other := set(versions.values()) - {self.profile.kafka_version}:
            raise DimsterError(
                f"clientVersion {', '.join(sorted(other))}: worker containers hold the cluster's Kafka "
                f"{self.profile.kafka_version} only; run other kafka-clients versions on local workers or agents"
            )

    def connect(self, run_name: str) -> None:
        pass  # the containers start once the cluster is up

    def start(self, cluster: ClusterBackend, run_name: str) -> None:
        self.containers = WorkerContainers(cluster, run_name, self.progress)
        self.agents = RemoteWorkers(
            self.containers.start(), self.containers.token, timeout=self.profile.worker_timeout_seconds
        )
        self.agents.connect(run_name)
        self.client_bootstrap = self.containers.client_bootstrap

    def workers(self, bundle: ResultsBundle) -> tuple[RemoteWorkers, int]:
        assert self.agents is not None, "workers() before start()"
        return agents_in_bundle(self.agents, bundle)

    def close(self) -> None:
        if self.agents:
            self.agents.close()
        if self.containers:
            self.containers.remove()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
