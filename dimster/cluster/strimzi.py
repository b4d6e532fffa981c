"""The `strimzi` backend: brokers the Strimzi operator runs in a Kubernetes namespace. dimster applies
the `Kafka` and `KafkaNodePool` resources of the profile (kubernetes/strimzi.py) and waits on the
operator's own word: the Kafka's `Ready` condition for the generation it asked for. A redeploy
changes `spec.kafka.config` and lets the operator apply it, dynamically where Kafka allows or by
rolling the brokers; which pods it rolled is read from their identities, before and after.

The brokers' restarts during a run are seen by the run as on any backend (its broker watch)."""

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dimster.cluster.backend import BackendPlug, ClusterStatus, NodeStatus, RedeployReport, merged_lines
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.broker_config import ConfigDefinition, check_names, config_definitions
from dimster.kafka.distribution import kafka_distribution
from dimster.kafka.properties import property_text
from dimster.kubernetes.api import ClusterApi, KubeApi
from dimster.kubernetes.strimzi import (
    PLAIN_PORT,
    StrimziProfile,
    broker_properties,
    check_config,
    kafka_config,
    node_pools,
    resources,
)
from dimster.paths import display, state_dir

POLL_SECONDS = 2.0
LOG_TAIL_LINES = 20_000  # of a broker pod's log kept in a run's bundle
CONTROL_PORT = 9090  # Strimzi's KRaft controller port


def ready(kafka: dict[str, Any] | None) -> bool:
    """The operator has reconciled the Kafka's latest spec and says it is ready."""
    if not kafka:
        return False
    status, generation = kafka.get("status") or {}, kafka["metadata"].get("generation", 0)
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return conditions.get("Ready") == "True" and status.get("observedGeneration", -1) >= generation


def not_ready_reason(kafka: dict[str, Any] | None) -> str:
    """What the operator last said of a Kafka that is not ready."""
    if not kafka:
        return "the Kafka resource does not exist"
    status, generation = kafka.get("status") or {}, kafka["metadata"].get("generation", 0)
    observed = status.get("observedGeneration", generation)
    if observed < generation:
        return f"the operator has not yet reconciled generation {generation} (its status is of {observed})"
    conditions = status.get("conditions") or []
    said = [f"{c.get('type')}: {c.get('reason', '')} {c.get('message', '')}".strip() for c in conditions]
    return "; ".join(said) or "no word from the operator yet (is the Strimzi operator watching the namespace?)"


def node_of(pod_name: str) -> int:
    """A Strimzi pod is named CLUSTER-POOL-NODEID."""
    return int(pod_name.rsplit("-", 1)[1])


def pod_node(pod: dict[str, Any]) -> int:
    return node_of(pod["metadata"]["name"])


class StrimziCluster:
    def __init__(
        self,
        profile: StrimziProfile,
        api: KubeApi | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        definitions: Callable[[], dict[str, ConfigDefinition]] | None = None,
    ):
        """`api`, `sleep`, `clock`: the Kubernetes API and time (tests give their own); `definitions`:
        Kafka's broker config names (default: read from the profile's Kafka version)."""
        self.profile = profile
        self._api = api
        self.sleep, self.clock = sleep, clock
        self.definitions = definitions or (lambda: config_definitions(kafka_distribution(profile.kafka_version)))
        self.root = state_dir() / "clusters" / profile.name

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            self._api = ClusterApi(self.profile.namespace, self.profile.kube_context)
        return self._api

    # -- config -----------------------------------------------------------------------------------
    def _source(self) -> str:
        return display(self.profile.broker_config_path)

    def check_broker_config(self) -> dict[str, str]:
        """The profile's broker config, checked by Kafka's names and by what Strimzi allows."""
        properties = broker_properties(self.profile)
        check_config(properties, self.profile, self._source())  # first: the operator's own reasons
        check_names(properties, self.definitions(), self._source())
        return properties

    def broker_config(self) -> dict[str, str]:
        """What the Kafka resource's spec.kafka.config says now, as text."""
        kafka = self.api.get("Kafka", self.profile.cluster_name)
        config = (kafka or {}).get("spec", {}).get("kafka", {}).get("config") or {}
        return {name: property_text(value) for name, value in config.items()}

    def _changed(self, running: dict[str, str]) -> dict[str, Any]:
        """What `running` (a spec.kafka.config) must change to be the profile's (None: removed)."""
        wanted = kafka_config(self.check_broker_config(), self.profile)
        texts = {name: property_text(value) for name, value in wanted.items()}
        return {k: wanted.get(k) for k in sorted({*texts, *running}) if texts.get(k) != running.get(k)}

    def check_running_config(self, progress=print) -> None:
        running = self.broker_config()
        if running and (changed := self._changed(running)):
            progress(
                f"the brokers run another broker config than the profile asks for ({', '.join(changed)}): "
                f"`dimster cluster redeploy {self.profile.name}` applies it"
            )

    # -- life -------------------------------------------------------------------------------------
    def up(self, progress=print) -> ClusterStatus:
        name = self.profile.cluster_name
        if self.api.get("Kafka", name) is None:
            for obj in resources(self.profile, self.check_broker_config(), self._source()):
                if self.api.get(obj["kind"], obj["metadata"]["name"]) is None:
                    self.api.create(obj)
            progress(f"applied Kafka '{name}' and its node pools in namespace {self.profile.namespace}")
        else:
            self.check_running_config(progress)
        self._wait_ready(progress)
        status = self.status()
        pods = len(status.nodes)
        progress(f"'{self.profile.name}' is up: {pods} broker pod(s), bootstrap servers {status.bootstrap_servers}")
        return status

    def _wait_ready(self, progress) -> None:
        deadline = self.clock() + self.profile.ready_timeout_seconds
        said = ""
        while True:
            kafka = self.api.get("Kafka", self.profile.cluster_name)
            if ready(kafka):
                return
            reason = not_ready_reason(kafka)
            if reason != said:
                progress(f"waiting for the operator: {reason}")
                said = reason
            if self.clock() > deadline:
                raise ClusterError(
                    f"'{self.profile.name}': Kafka '{self.profile.cluster_name}' not ready after "
                    f"{self.profile.ready_timeout_seconds} s: {reason}"
                )
            self.sleep(POLL_SECONDS)

    def ensure(self, progress=print) -> None:
        if self.api.get("Kafka", self.profile.cluster_name) is None:
            self.up(progress)
        elif self._changed(self.broker_config()):
            self.redeploy(progress)
        else:
            self._wait_ready(progress)

    def down(self, progress=print) -> list[int]:
        stopped = sorted(pod_node(pod) for pod in self._broker_pods())
        kafka = self.api.get("Kafka", self.profile.cluster_name)
        self.api.delete("Kafka", self.profile.cluster_name)
        for pool in self._pool_names(kafka):
            self.api.delete("KafkaNodePool", pool)
        deadline = self.clock() + self.profile.ready_timeout_seconds
        while self.api.pods(self.profile.cluster_name):
            if self.clock() > deadline:
                raise ClusterError(f"'{self.profile.name}': its pods are still there after the Kafka was deleted")
            self.sleep(POLL_SECONDS)
        progress(f"'{self.profile.name}': deleted Kafka '{self.profile.cluster_name}' and its node pools")
        return stopped

    def _pool_names(self, kafka: dict[str, Any] | None) -> list[str]:
        """The Kafka's node pools as its status lists them, else as the profile has them."""
        recorded = [p["name"] for p in ((kafka or {}).get("status") or {}).get("kafkaNodePools") or []]
        return recorded or list(node_pools(self.profile))

    def redeploy(self, progress=print) -> RedeployReport:
        changed = self._changed(self.broker_config())
        if not changed:
            progress(f"'{self.profile.name}' already runs the profile's broker config")
            return RedeployReport({}, {}, [])
        before = {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in self._broker_pods()}
        # a merge patch: None removes a property
        self.api.patch("Kafka", self.profile.cluster_name, {"spec": {"kafka": {"config": changed}}})
        progress(f"patched spec.kafka.config of Kafka '{self.profile.cluster_name}': {', '.join(changed)}")
        self._wait_ready(progress)
        after = {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in self._broker_pods()}
        rolled = sorted(node_of(name) for name, uid in before.items() if after.get(name) != uid)
        applied = {name: None if value is None else property_text(value) for name, value in changed.items()}
        if rolled:
            progress(f"the operator rolled broker pod(s) {', '.join(map(str, rolled))} to apply it")
            return RedeployReport({}, applied, rolled)
        progress("the operator applied it without a restart (dynamic properties)")
        return RedeployReport(applied, {}, [])

    # -- state ------------------------------------------------------------------------------------
    def _broker_pods(self) -> list[dict[str, Any]]:
        pods = self.api.pods(self.profile.cluster_name)
        return [p for p in pods if p["metadata"].get("labels", {}).get("strimzi.io/broker-role") == "true"]

    def status(self) -> ClusterStatus:
        kafka = self.api.get("Kafka", self.profile.cluster_name)
        listeners = ((kafka or {}).get("status") or {}).get("listeners") or []
        bootstrap = next((x["bootstrapServers"] for x in listeners if x.get("name") == "plain"), None)
        nodes = []
        for pod in sorted(self._broker_pods(), key=pod_node):
            conditions = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions") or []}
            alive = (pod.get("status") or {}).get("phase") == "Running"
            log = f"pod/{pod['metadata']['name']}"
            nodes.append(
                NodeStatus(pod_node(pod), None, alive, conditions.get("Ready") == "True", PLAIN_PORT, CONTROL_PORT, log)
            )
        version = ((kafka or {}).get("status") or {}).get("kafkaVersion") or self.profile.kafka_version
        return ClusterStatus(
            self.profile.name, "strimzi", version, bootstrap or self.profile.bootstrap_servers,
            kafka is not None, ready(kafka) and all(n.registered for n in nodes), nodes,
        )  # fmt: skip

    def log_lines(self, lines: int) -> dict[int, list[str]]:
        pods = sorted(self._broker_pods(), key=pod_node)
        return {pod_node(p): self.api.pod_log(p["metadata"]["name"], lines).splitlines() for p in pods}

    def log_files(self) -> dict[int, Path]:
        """Each broker pod's log, its last LOG_TAIL_LINES copied into the cluster folder now."""
        files = {}
        for node, lines in self.log_lines(LOG_TAIL_LINES).items():
            path = self.root / f"node-{node}" / "server.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n")
            files[node] = path
        return files

    def follow_logs(self, node_ids: list[int]) -> Iterator[tuple[int, str]]:
        pods = {pod_node(p): p["metadata"]["name"] for p in self._broker_pods() if pod_node(p) in node_ids}
        return merged_lines({node: self.api.follow_log(pod) for node, pod in pods.items()})

    # -- faults and data --------------------------------------------------------------------------
    def fault(self, node_id: int, action: str, progress) -> str:
        pods = {pod_node(p): p["metadata"]["name"] for p in self._broker_pods()}
        if action != "kill":
            raise DimsterError(
                f"'{self.profile.name}' is a Strimzi cluster: dimster kills its broker pods (the operator "
                f"starts them again); {action} needs nodes dimster runs itself (backend local)"
            )
        if node_id not in pods:
            raise DimsterError(f"'{self.profile.name}' has no broker pod of node {node_id} (valid: {sorted(pods)})")
        self.api.delete_pod(pods[node_id])
        return f"deleted pod {pods[node_id]}: the operator starts it again"

    def client_security(self) -> dict[str, str]:
        return {}  # the plain internal listener

    def remove_data(self) -> None:
        if self.api.get("Kafka", self.profile.cluster_name) is not None:
            raise DimsterError(f"'{self.profile.name}' is running; `dimster cluster down {self.profile.name}` first")
        for claim in self.api.claims(self.profile.cluster_name):
            self.api.delete_claim(claim)


PLUG = BackendPlug(StrimziProfile, StrimziCluster)
