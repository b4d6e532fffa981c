"""The `docker` backend: KRaft nodes (each broker and controller) as containers of a Docker-compatible
daemon, driven through the docker SDK. The image is laid out like the official `apache/kafka` one
(`/opt/kafka/bin`, `/opt/kafka/libs`); dimster writes each node's server.properties from the same
broker-config file as for `local` and copies it in, keeps the data in a named volume per node and
publishes the client and metrics ports on the profile's host. Everything it creates is labelled."""

import contextlib
import functools
import shutil
from collections.abc import Iterator
from pathlib import Path

from docker.models.containers import Container

from dimster.clock import Deadline
from dimster.cluster.backend import BackendPlug, ClusterStatus, NodeStatus, merged_lines
from dimster.cluster.docker_nodes import DockerNodes, DockerProfile, DockerState
from dimster.containers.daemon import DAEMON_ERRORS, api_reason, daemon_address, removed_or_fail, stop_and_remove
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.admin import registered_brokers
from dimster.kafka.distribution import KafkaDistribution, kafka_distribution

RESTART_STOP_SECONDS = 30  # a node stopped for a restart: SIGTERM, then SIGKILL after this long
LOG_TAIL_LINES = 20_000  # of a node's container log kept in a run's bundle
DOWN_STOP_SECONDS = 10  # all nodes at once: the last ones wait for a quorum that is going, so not long


def _daemon_errors(method):
    """What the daemon refuses half-way becomes one ClusterError line naming the daemon."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except DAEMON_ERRORS as e:
            address = daemon_address(self.profile.docker_host)
            raise ClusterError(f"the Docker daemon at {address} refused: {api_reason(e)}") from None

    return wrapper


class DockerCluster(DockerNodes):
    profile: DockerProfile
    backend = "docker"

    # ---- the backend interface -----------------------------------------------------------------
    def _running(self, progress) -> DockerState | None:
        """The recorded state when all the nodes' containers run; stale containers are removed."""
        state = self.recorded_state()
        containers = self.containers()
        running = {node_id for node_id, c in containers.items() if c.status == "running"}
        if state is not None and running == set(self.profile.node_ids) and len(containers) == self.profile.nodes:
            return state
        if containers:
            progress(f"stale containers of '{self.profile.name}' ({len(running)}/{len(containers)} running): removing")
            kept = stop_and_remove(list(containers.values()), DOWN_STOP_SECONDS)
            removed_or_fail(kept, f"stale containers of '{self.profile.name}'")
        self.state_file.unlink(missing_ok=True)
        return None

    def fault(self, node_id: int, action: str, progress) -> str:
        raise DimsterError(
            f"node faults are for backend local so far; on '{self.profile.name}' the daemon's own "
            f"`docker {'unpause' if action == 'resume' else action} "
            f"{self.container_name(self.profile.node_index(node_id))}` does it"
        )

    @_daemon_errors
    def up(self, progress=print) -> ClusterStatus:
        state = self._running(progress)  # first: no daemon, no cluster
        distribution = kafka_distribution(self.profile.kafka_version)
        if state is not None:
            self.wait_registered(set(self.profile.node_ids), Deadline(self.profile.start_timeout_seconds))
            progress(f"'{self.profile.name}' is already running (Kafka {state.kafka_version}): reusing it")
            return self.status()
        broker_config = self.prepare_configs(distribution)
        image = self._image(progress)
        self.check_ports_free()
        self._network()
        cluster_id = self._cluster_id()
        progress(f"starting {self.profile.nodes} Kafka node container(s) of '{self.profile.name}' from {image}")
        started: list[Container] = []
        try:
            for index in range(self.profile.nodes):
                started.append(self._start_node(index, image, cluster_id))
            DockerState(distribution.version, image, broker_config).save(self.state_file)
            self.wait_registered(set(self.profile.node_ids), Deadline(self.profile.start_timeout_seconds))
            self.wait_share_groups(distribution)
        except BaseException:
            stop_and_remove(started, DOWN_STOP_SECONDS)
            self.state_file.unlink(missing_ok=True)
            raise
        return self.status()

    @_daemon_errors
    def down(self, progress=print) -> list[int]:
        workers = self._existing(
            lambda: self.client.containers.list(all=True, ignore_removed=True, filters=self._ours(role="worker"))
        )
        if workers:  # left by a run that was killed: they hold the network
            removed_or_fail(stop_and_remove(workers, DOWN_STOP_SECONDS), "worker containers")
            progress(f"removed {len(workers)} worker container(s) left by an earlier run")
        containers = self._existing_containers()
        if containers:  # all at once: a lone survivor would wait for a quorum that is gone
            kept = stop_and_remove(list(containers.values()), DOWN_STOP_SECONDS)
            removed_or_fail(kept, f"every node container of '{self.profile.name}'")
            for node_id, container in sorted(containers.items()):
                progress(f"node {node_id} (container {container.name}) removed")
        for network in self._existing(lambda: self.client.networks.list(filters=self._ours())):
            network.remove()
        self.state_file.unlink(missing_ok=True)
        return sorted(containers)

    def _existing_containers(self) -> dict[int, Container]:
        return self._existing(self.containers) or {}

    def _existing(self, listing):
        """What `listing` finds; nothing when no daemon answers and dimster has no record of a cluster."""
        try:
            return listing()
        except DimsterError:
            if self.state_file.exists():
                raise
            return []

    @_daemon_errors
    def remove_data(self) -> None:
        """Delete the nodes' volumes and the cluster folder (only when no node container exists)."""
        if self.containers():
            raise DimsterError(f"'{self.profile.name}' is running; `dimster cluster down {self.profile.name}` first")
        for volume in self.client.volumes.list(filters=self._ours(role="data")):
            volume.remove(force=True)
        shutil.rmtree(self.root, ignore_errors=True)

    @_daemon_errors
    def status(self) -> ClusterStatus:
        state = self.recorded_state()
        containers = self._existing_containers()
        alive = {node_id: c.status == "running" for node_id, c in containers.items()}
        registered = registered_brokers(self.profile.bootstrap_servers) if any(alive.values()) else set()
        nodes = [
            NodeStatus(
                node_id=node_id,
                pid=None,
                alive=alive.get(node_id, False),
                registered=node_id in registered,
                broker_port=self.profile.broker_port(i),
                controller_port=0,
                log_file=f"container {self.container_name(i)}",
                kafka_version=state.kafka_version if state and node_id in containers else None,
            )
            for i, node_id in enumerate(self.profile.node_ids)
        ]
        return ClusterStatus(
            environment=self.profile.name,
            backend="docker",
            kafka_version=state.kafka_version if state else self.profile.kafka_version,
            bootstrap_servers=self.profile.bootstrap_servers,
            running=any(alive.values()),
            healthy=all(n.alive and n.registered for n in nodes),
            nodes=nodes,
        )

    @_daemon_errors
    def redeploy(self, progress=print):
        return super().redeploy(progress)

    def running_config(self, progress) -> tuple[str, dict[str, str]] | None:
        state = self._running(progress)
        if state is not None and state.image != self.profile.kafka_image:
            raise DimsterError(
                f"'{self.profile.name}' runs the image {state.image} but the profile asks for "
                f"{self.profile.kafka_image}; `dimster cluster down {self.profile.name}` first to change images"
            )
        return (state.kafka_version, state.broker_config) if state else None

    @_daemon_errors
    def restart_node(self, index: int, distribution: KafkaDistribution, progress) -> None:
        """Recreate node `index`'s container with its current server.properties (same volume, same id)."""
        state = self.recorded_state()
        assert state is not None, "restart_node on a cluster that is not running"
        node_id = self.profile.node_ids[index]
        old = self.containers().get(node_id)
        cluster_id = self._cluster_id()
        address = None
        if old is not None:
            address = self.address(old)
            progress(f"node {node_id}: stopping container {old.name}")
            removed_or_fail(stop_and_remove([old], RESTART_STOP_SECONDS), f"node {node_id}'s container")
        self._start_node(index, state.image, cluster_id, address)

    # ---- logs ---------------------------------------------------------------------------------
    def log_files(self) -> dict[int, Path]:
        """Each node container's log, copied into the cluster folder now (a run's bundle keeps them)."""
        files = {}
        try:
            containers = self.containers()
        except (DimsterError, *DAEMON_ERRORS):
            return {}  # the daemon is gone: a run's results do not wait for it
        for node_id, container in sorted(containers.items()):
            path = self.root / f"node-{node_id}" / "server.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(*DAEMON_ERRORS):
                path.write_bytes(container.logs(tail=LOG_TAIL_LINES))
                files[node_id] = path
        return files

    @_daemon_errors
    def log_lines(self, lines: int) -> dict[int, list[str]]:
        """The last `lines` lines each node's container wrote, by node id."""
        return {node_id: self._tail(c, lines) for node_id, c in sorted(self.containers().items())}

    def follow_logs(self, node_ids: list[int]) -> Iterator[tuple[int, str]]:
        """New lines of the nodes' containers as they come, until every container stopped (a recreated
        container is a new log)."""
        try:
            containers = {n: c for n, c in self.containers().items() if n in node_ids}
        except DAEMON_ERRORS as e:
            raise ClusterError(f"the Docker daemon refused the logs: {api_reason(e)}") from None
        return merged_lines({node_id: _new_lines(container) for node_id, container in containers.items()})


def _new_lines(container: Container) -> Iterator[str]:
    """A container's log lines from now on, until it stops or the daemon goes."""
    with contextlib.suppress(*DAEMON_ERRORS):
        for chunk in container.logs(stream=True, follow=True, tail=0):
            yield from chunk.decode(errors="replace").splitlines()


PLUG = BackendPlug(DockerProfile, DockerCluster)
