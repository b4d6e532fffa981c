"""The `local` backend: KRaft nodes (broker and controller combined) as JVM processes on this host."""

import shutil
import signal
import time

from dimster.clock import Deadline
from dimster.cluster.backend import BackendPlug, ClusterStatus, NodeStatus
from dimster.cluster.local_nodes import ClusterState, LocalNodes, LocalProfile
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.distribution import KafkaDistribution, kafka_distribution
from dimster.kafka.jmx_exporter import agent_jar

ISOLATIONS = {"isolate": "nodes", "isolate-all": "all"}  # a fault's action -> from whom the node is cut off


class LocalCluster(LocalNodes):
    profile: LocalProfile
    backend = "local"

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
            deadline = Deadline(self.profile.start_timeout_seconds)
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
        for index in missing:  # each on the version it ran (an upgrade may be half-way)
            self._start_again(state, index, kafka_distribution(state.node_version(index)))
            progress(
                f"node {self.node_id(index)} was not running: started it again with its data "
                f"(pid {state.nodes[index].pid})"
            )
        deadline = Deadline(self.profile.start_timeout_seconds)
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
                kafka_version=state.node_version(i) if state and node_id in processes else None,
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
        if len(versions := {state.node_version(i) for i in range(len(state.nodes))}) > 1:
            raise ClusterError(
                f"'{self.profile.name}' is half-way through an upgrade (Kafka {', '.join(sorted(versions))}): "
                f"`dimster cluster upgrade {self.profile.name} --to VERSION` finishes it first"
            )
        return state.kafka_version, state.broker_config

    def restart_node(self, index: int, distribution: KafkaDistribution, progress) -> None:
        self.stop_node(index, progress)
        self.start_node(index, distribution, progress)

    def stop_node(self, index: int, progress) -> None:
        """Stop node `index` gracefully (SIGTERM to its recorded PID, SIGKILL after 30 s), to start it
        again at once: what that needs is checked first."""
        if self.profile.broker_metrics:
            agent_jar()  # fetched, if it must be, before the node goes down
        self.check_password()
        state = self.recorded_state()
        assert state is not None, "stop_node on a cluster that is not running"
        node = state.nodes[index]
        progress(f"node {node.node_id}: stopping (pid {node.pid})")
        node.process.stop()

    def start_node(self, index: int, distribution: KafkaDistribution, progress) -> None:
        """Start stopped node `index` on `distribution` with its data and config file, and record it."""
        state = self.recorded_state()
        assert state is not None, "start_node on a cluster that is not running"
        state.nodes[index] = self._start_node(distribution, index)
        state.save(self.state_file)
        progress(f"node {self.node_id(index)}: started again (pid {state.nodes[index].pid})")

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
            self.restart_node(index, kafka_distribution(state.node_version(index)), progress)
        elif action == "start":
            self.check_password()
            self._start_again(state, index, kafka_distribution(state.node_version(index)))
        if action in ("restart", "start"):
            self.wait_serving(index, Deadline(self.profile.start_timeout_seconds))
            started = self.recorded_state()
            assert started is not None  # the restart or start recorded the node's new process
            return f"node {node_id} {action}ed (pid {started.nodes[index].pid})"
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

    def wait_serving(self, index: int, deadline: Deadline) -> None:
        """Until node `index` answers on its own listener and counts itself registered. Unlike
        wait_registered, a killed node's old registration (kept until the controller's session
        time-out) does not count: a broker answers requests only once the controller unfenced it."""
        node_id = self.node_id(index)
        address = f"{self.profile.node_host(index)}:{self.profile.broker_port(index)}"
        while node_id not in self.registered(address, timeout=1.5):
            self.check_nodes_alive({node_id})
            if deadline.passed():
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


PLUG = BackendPlug(LocalProfile, LocalCluster)
