"""The `strimzi` backend's sequence (issue 50) against an in-memory Kubernetes API (our KubeApi seam)
whose operator answers as Strimzi 1.2.0's does: its statuses are built as KafkaAssemblyOperator builds
them (a new Kafka: NotReady, reason Creating; a failed reconcile: NotReady with the exception's class
and message; a finished one: Ready, with observedGeneration, listeners and node pools, written only
when the reconcile ends), and each passes the strict schema of the Kafka CRD. Not a live operator: see
docs/kubernetes.md for what a user checks on first use."""

import copy
import itertools
from typing import Any

import pytest

from dimster.cluster.backend import merged_lines
from dimster.cluster.backends import profile_model
from dimster.cluster.strimzi import StrimziCluster
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.broker_config import ConfigDefinition, load_broker_config
from dimster.kubernetes.strimzi import StrimziProfile
from tests.kube_schemas import crd_validators, schema_errors

pytestmark = pytest.mark.unit

VALIDATORS = crd_validators("strimzi-1.2.0")
NAME = ConfigDefinition("string", None, None, "cluster-wide")  # Kafka's own names are checked as for local
CREATING = {"type": "NotReady", "status": "True", "reason": "Creating", "message": "Kafka cluster is being deployed"}
FAILED = {"type": "NotReady", "status": "True", "reason": "TimeoutException", "message": "Exceeded timeout of 300000ms"}


def ready_status(generation: int) -> dict[str, Any]:
    return {
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-03T10:00:00Z"}],
        "observedGeneration": generation,
        "listeners": [{"name": "plain", "bootstrapServers": "dimster-kafka-bootstrap.kafka.svc:9092",
                       "addresses": [{"host": "dimster-kafka-bootstrap.kafka.svc", "port": 9092}]}],
        "kafkaNodePools": [{"name": "dual-role"}],
        "clusterId": "yO8ZGQJ3T0a0tVZ8Rlb9Tg",
        "operatorLastSuccessfulVersion": "1.2.0",
        "kafkaVersion": "4.3.1",
        "kafkaMetadataVersion": "4.3-IV0",
    }  # fmt: skip


class Operator:
    """A namespace with the Strimzi operator in it, in memory. `plan`: the statuses the Kafka shows to
    successive reads after each create or patch (the last one stays); `rolls`: whether a patch makes
    the operator replace the broker pods."""

    def __init__(self, nodes: int = 3):
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, ...]] = []
        self.plan: list[dict[str, Any] | None] = []
        self.nodes, self.rolls = nodes, False
        self.uids = itertools.count()
        self.pod_uids: dict[str, str] = {}

    def _pods_up(self) -> None:
        self.pod_uids = {f"dimster-dual-role-{n}": f"uid-{next(self.uids)}" for n in range(self.nodes)}

    def get(self, kind, name):
        obj = self.objects.get((kind, name))
        if obj is not None and kind == "Kafka" and self.plan:
            status = self.plan.pop(0) if len(self.plan) > 1 else self.plan[0]
            if status is not None:
                obj["status"] = status
                if status.get("observedGeneration") == obj["metadata"]["generation"] and not self.pod_uids:
                    self._pods_up()
        return copy.deepcopy(obj)

    def create(self, obj):
        self.calls.append(("create", obj["kind"], obj["metadata"]["name"]))
        self.objects[(obj["kind"], obj["metadata"]["name"])] = {**copy.deepcopy(obj), "metadata": {
            **obj["metadata"], "generation": 1, "uid": f"uid-{next(self.uids)}"}}  # fmt: skip

    def patch(self, kind, name, patch):
        self.calls.append(("patch", kind, name))
        obj = self.objects[(kind, name)]
        config = obj["spec"]["kafka"]["config"]
        for key, value in patch["spec"]["kafka"]["config"].items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        obj["metadata"]["generation"] += 1
        if self.rolls:
            self._pods_up()

    def delete(self, kind, name):
        self.calls.append(("delete", kind, name))
        if self.objects.pop((kind, name), None) is not None and kind == "Kafka":
            self.pod_uids = {}

    def pods(self, cluster):
        labels = {"strimzi.io/cluster": cluster, "strimzi.io/broker-role": "true"}
        return [{"metadata": {"name": name, "uid": uid, "labels": labels},
                 "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
                for name, uid in self.pod_uids.items()]  # fmt: skip

    def delete_pod(self, name):
        self.calls.append(("delete_pod", name))

    def claims(self, cluster):
        return ["data-0-dimster-dual-role-0"]

    def delete_claim(self, name):
        self.calls.append(("delete_claim", name))

    def pod_log(self, name, lines=None):
        return f"[{name}] started\n"

    def follow_log(self, name):
        yield f"[{name}] a new line"


def cluster(operator: Operator, **keys) -> tuple[StrimziCluster, list[str]]:
    profile = StrimziProfile.model_validate({"name": "k8s", "backend": "strimzi", **keys})
    ticks = itertools.count()
    extra = ["num.io.threads", "log.cleaner.min.cleanable.ratio"]
    names = {name: NAME for name in [*load_broker_config(profile.broker_config_path), *extra]}
    backend = StrimziCluster(profile, operator, sleep=lambda _: None, clock=lambda: 2.0 * next(ticks),
                             definitions=lambda: names)  # fmt: skip
    return backend, []


def test_the_operators_statuses_pass_the_kafka_crds_schema():
    for status in (
        {"conditions": [{**CREATING, "lastTransitionTime": "2026-12-03T10:00:00Z"}]},
        {"conditions": [{**FAILED, "lastTransitionTime": "2026-12-03T10:05:00Z"}], "observedGeneration": 1},
        ready_status(2),
    ):
        kafka = {"apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka", "metadata": {"name": "dimster"},
                 "spec": {"kafka": {"listeners": [{"name": "plain", "port": 9092, "type": "internal", "tls": False}]}},
                 "status": status}  # fmt: skip
        assert schema_errors(VALIDATORS, kafka) == []


def test_up_applies_the_pools_then_the_kafka_and_waits_for_the_operators_ready_of_that_generation():
    operator = Operator()
    operator.plan = [None, {"conditions": [CREATING]}, {"conditions": [CREATING]}, ready_status(1)]
    backend, said = cluster(operator)
    status = backend.up(said.append)
    assert operator.calls == [("create", "KafkaNodePool", "dual-role"), ("create", "Kafka", "dimster")]
    assert said == [
        "applied Kafka 'dimster' and its node pools in namespace kafka",
        "waiting for the operator: no word from the operator yet (is the Strimzi operator watching the namespace?)",
        "waiting for the operator: NotReady: Creating Kafka cluster is being deployed",
        "'k8s' is up: 3 broker pod(s), bootstrap servers dimster-kafka-bootstrap.kafka.svc:9092",
    ]
    assert status.healthy and status.running and [n.node_id for n in status.nodes] == [0, 1, 2]
    assert status.kafka_version == "4.3.1" and status.backend == "strimzi"
    for obj in operator.objects.values():  # what was applied, as the API server holds it
        assert schema_errors(VALIDATORS, obj) == []
    # up again: nothing applied, the same config, ready at once
    operator.calls.clear()
    assert backend.up(said.append).healthy and operator.calls == []


def test_up_that_the_operator_fails_is_one_line_with_its_reason_at_the_deadline():
    operator = Operator()
    operator.plan = [{"conditions": [CREATING]}, {"conditions": [FAILED], "observedGeneration": 1}]
    backend, said = cluster(operator, readyTimeoutSeconds=30)
    with pytest.raises(ClusterError) as e:
        backend.up(said.append)
    assert str(e.value) == (
        "'k8s': Kafka 'dimster' not ready after 30 s: NotReady: TimeoutException Exceeded timeout of 300000ms"
    )


@pytest.mark.parametrize("rolls", [True, False])
def test_redeploy_patches_only_what_changed_and_names_the_pods_the_operator_rolled(rolls):
    operator = Operator()
    operator.plan = [ready_status(1)]
    backend, said = cluster(operator)
    backend.up(said.append)
    before = {**operator.pod_uids}
    changed = {"num.io.threads": 16, "group.share.max.size": 500}
    backend.profile = backend.profile.model_copy(update={"broker_overrides": changed})
    # the operator's status stays that of generation 1 until its reconcile of generation 2 ends
    operator.plan, operator.rolls = [ready_status(1), ready_status(1), ready_status(2)], rolls
    report = backend.redeploy(said.append)
    assert operator.calls[-1] == ("patch", "Kafka", "dimster")
    config = operator.objects[("Kafka", "dimster")]["spec"]["kafka"]["config"]
    assert config["num.io.threads"] == 16 and config["group.share.max.size"] == 500
    assert "waiting for the operator: the operator has not yet reconciled generation 2 (its status is of 1)" in said
    applied = {"group.share.max.size": "500", "num.io.threads": "16"}
    if rolls:
        assert operator.pod_uids.keys() == before.keys() and operator.pod_uids != before
        assert (report.restarted, report.restarted_nodes, report.dynamic) == (applied, [0, 1, 2], {})
    else:
        assert (report.dynamic, report.restarted, report.restarted_nodes) == (applied, {}, [])
    # the profile back as it was: the overrides removed from spec.kafka.config
    backend.profile = backend.profile.model_copy(update={"broker_overrides": {}})
    operator.plan = [ready_status(3)]
    backend.redeploy(said.append)
    config = operator.objects[("Kafka", "dimster")]["spec"]["kafka"]["config"]
    assert "num.io.threads" not in config and config["group.share.max.size"] == 1000
    assert backend.redeploy(said.append) == type(report)({}, {}, []) and said[-1].endswith("broker config")


def test_down_deletes_the_kafka_and_its_pools_and_waits_for_the_pods():
    operator = Operator()
    operator.plan = [ready_status(1)]
    backend, said = cluster(operator)
    backend.up(said.append)
    assert backend.down(said.append) == [0, 1, 2]
    assert operator.calls[-2:] == [("delete", "Kafka", "dimster"), ("delete", "KafkaNodePool", "dual-role")]
    assert operator.objects == {} and not backend.status().running
    backend.remove_data()
    assert operator.calls[-1] == ("delete_claim", "data-0-dimster-dual-role-0")


def test_a_kill_deletes_the_pod_and_other_faults_are_one_line():
    operator = Operator()
    operator.plan = [ready_status(1)]
    backend, said = cluster(operator)
    backend.up(said.append)
    assert backend.fault(1, "kill", said.append) == "deleted pod dimster-dual-role-1: the operator starts it again"
    assert operator.calls[-1] == ("delete_pod", "dimster-dual-role-1")
    with pytest.raises(DimsterError, match=r"^'k8s' is a Strimzi cluster: dimster kills its broker pods"):
        backend.fault(1, "pause", said.append)
    with pytest.raises(DimsterError, match=r"has no broker pod of node 7 \(valid: \[0, 1, 2\]\)"):
        backend.fault(7, "kill", said.append)
    assert backend.log_lines(5) == {n: [f"[dimster-dual-role-{n}] started"] for n in range(3)}
    assert list(backend.follow_logs([2])) == [(2, "[dimster-dual-role-2] a new line")]


def test_an_environment_of_backend_strimzi_is_read_into_its_model_and_a_forbidden_property_stops_up():
    assert profile_model({"backend": "strimzi"}) is StrimziProfile
    operator = Operator()
    backend, said = cluster(operator, brokerOverrides={"listeners": "PLAINTEXT://:9092"})
    with pytest.raises(DimsterError, match="'listeners' is set by the Strimzi operator"):
        backend.up(said.append)
    assert operator.calls == []  # nothing applied


def test_several_nodes_logs_merge_each_in_its_order_until_every_one_ended():
    """merged_lines, which the docker and strimzi backends follow their nodes' logs with: each node's
    lines in their order, tagged with the node, and the end once every source has ended (one that
    ends at once included)."""
    sources = {1: (f"a{i}" for i in range(500)), 2: iter(()), 3: [f"c{i}" for i in range(300)]}
    merged = list(merged_lines(sources))
    assert len(merged) == 800
    for node, prefix, count in ((1, "a", 500), (3, "c", 300)):
        assert [line for n, line in merged if n == node] == [f"{prefix}{i}" for i in range(count)]


def test_a_property_of_any_number_form_reads_back_as_written_and_makes_no_change():
    """spec.kafka.config holds integers as numbers and other forms as their text: what the profile
    wrote reads back the same, so `ensure` (each run's start) finds nothing to redeploy."""
    operator = Operator()
    operator.plan = [ready_status(1)]
    backend, said = cluster(
        operator, brokerOverrides={"num.io.threads": "1e1", "log.cleaner.min.cleanable.ratio": "0.50"}
    )
    backend.up(said.append)
    config = operator.objects[("Kafka", "dimster")]["spec"]["kafka"]["config"]
    assert (config["num.io.threads"], config["log.cleaner.min.cleanable.ratio"]) == ("1e1", "0.50")
    assert config["group.share.max.size"] == 1000 and config["num.partitions"] == 1
    operator.calls.clear()
    backend.ensure(said.append)
    assert operator.calls == [] and backend.redeploy(said.append).dynamic == {}
