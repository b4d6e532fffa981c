"""The Strimzi resources of a `backend: strimzi` profile (issue 50): rendered from the profile and the
shipped broker config, they pass the strict schemas of Strimzi 1.2.0's own CRDs; what the operator
would refuse is one line before anything is applied."""

import copy

import pytest
from pydantic import ValidationError

from dimster.errors import DimsterError
from dimster.kafka.broker_config import load_broker_config
from dimster.kubernetes.strimzi import KAFKA_VERSIONS, StrimziProfile, resources
from dimster.paths import project_dir
from tests.kube_schemas import crd_validators, schema_errors

pytestmark = pytest.mark.unit

VALIDATORS = crd_validators("strimzi-1.2.0")
SHIPPED = load_broker_config(project_dir() / "run/broker-configs/default.yaml")
SOURCE = "run/broker-configs/default.yaml"
VALID = ", ".join(KAFKA_VERSIONS)


def profile(**keys) -> StrimziProfile:
    return StrimziProfile.model_validate({"name": "k8s", "backend": "strimzi", **keys})


@pytest.mark.parametrize(
    "keys",
    [
        {},
        {"nodes": 1},
        {"nodes": 5, "controllers": 3, "storage": {"size": "20Gi", "class": "fast-ssd", "deleteClaim": False}},
        {"storage": {"type": "ephemeral"}, "heap": "2g", "kafkaVersion": "4.2.1",
         "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}},
    ],
)  # fmt: skip
def test_each_rendered_resource_passes_its_crds_strict_schema(keys):
    p = profile(**keys)
    rendered = resources(p, SHIPPED, SOURCE)
    assert [(r["kind"], schema_errors(VALIDATORS, r)) for r in rendered] == [(r["kind"], []) for r in rendered]
    *pools, kafka = rendered
    assert kafka["kind"] == "Kafka" and kafka["metadata"] == {
        "name": "dimster", "namespace": "kafka", "labels": {"app.kubernetes.io/managed-by": "dimster"},
    }  # fmt: skip
    assert kafka["spec"]["kafka"]["version"] == p.kafka_version
    # every pool belongs to the Kafka by its label; the brokers' replicas are the profile's nodes
    assert {pool["metadata"]["labels"]["strimzi.io/cluster"] for pool in pools} == {"dimster"}
    brokers = [pool for pool in pools if "broker" in pool["spec"]["roles"]]
    controllers = [pool for pool in pools if "controller" in pool["spec"]["roles"]]
    assert [b["spec"]["replicas"] for b in brokers] == [p.nodes]
    assert [c["spec"]["replicas"] for c in controllers] == [p.controllers or p.nodes]
    assert p.bootstrap_servers == "dimster-kafka-bootstrap.kafka.svc:9092"


def test_the_broker_config_is_spec_kafka_config_typed_with_the_internal_topics_replication():
    [_, kafka] = resources(profile(nodes=1), SHIPPED, SOURCE)
    config = kafka["spec"]["kafka"]["config"]
    assert config["group.share.partition.max.record.locks"] == 2000  # a number, as Strimzi's examples write it
    assert config["group.share.max.size"] == 1000 and config["num.partitions"] == 1
    derived = {"offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
               "share.coordinator.state.topic.replication.factor": 1, "default.replication.factor": 1,
               "transaction.state.log.min.isr": 1, "share.coordinator.state.topic.min.isr": 1,
               "group.initial.rebalance.delay.ms": 0}  # fmt: skip
    # as dimster's own nodes of one broker have them: a share group's state topic needs its min ISR
    assert config == derived | {k: (int(v) if v.isdigit() else v) for k, v in SHIPPED.items()}
    *_, five = resources(profile(nodes=5), SHIPPED, SOURCE)
    assert five["spec"]["kafka"]["config"]["transaction.state.log.replication.factor"] == 3
    assert five["spec"]["kafka"]["config"]["share.coordinator.state.topic.min.isr"] == 2
    # the broker config's own choice stands
    *_, own = resources(profile(nodes=5), {**SHIPPED, "offsets.topic.replication.factor": "5"}, SOURCE)
    assert own["spec"]["kafka"]["config"]["offsets.topic.replication.factor"] == 5


def test_the_strict_schema_finds_a_field_the_crd_does_not_name_and_a_wrong_type():
    [pool, kafka] = resources(profile(), SHIPPED, SOURCE)
    unknown = copy.deepcopy(kafka)
    unknown["spec"]["kafka"]["listener"] = []  # misspelt
    assert any("'listener' was unexpected" in e for e in schema_errors(VALIDATORS, unknown))
    wrong = copy.deepcopy(pool)
    wrong["spec"]["replicas"] = "three"
    assert schema_errors(VALIDATORS, wrong) == ["spec.replicas: 'three' is not of type 'integer'"]


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("listeners", "PLAINTEXT://:9092", False),
        ("ssl.keystore.location", "/x", False),
        ("controller.quorum.voters", "1@a:9093", False),
        ("log.dirs", "/data", False),
        ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256", True),  # an exception to ssl.
        ("controller.quorum.fetch.timeout.ms", "2000", True),  # an exception to controller.
        ("group.share.record.lock.duration.ms", "15000", True),
    ],
)
def test_a_property_the_operator_sets_itself_is_one_line_naming_it(name, value, allowed):
    config = {**SHIPPED, name: value}
    if allowed:
        assert resources(profile(), config, SOURCE)[-1]["spec"]["kafka"]["config"][name] is not None
        return
    with pytest.raises(DimsterError) as e:
        resources(profile(), config, SOURCE)
    assert str(e.value) == (
        f"{SOURCE}: '{name}' is set by the Strimzi operator, not in spec.kafka.config (Strimzi 1.2.0 forbids it); "
        "remove it"
    )


def test_a_replication_the_nodes_cannot_hold_is_one_line():
    with pytest.raises(DimsterError) as e:
        resources(profile(nodes=1), {**SHIPPED, "min.insync.replicas": "2"}, SOURCE)
    assert str(e.value) == (
        f"{SOURCE}: min.insync.replicas=2 needs 2 brokers; run/environments/k8s.yaml has nodes: 1 "
        "(raise nodes, or lower min.insync.replicas)"
    )
    assert resources(profile(nodes=3), {**SHIPPED, "min.insync.replicas": "2"}, SOURCE)


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        ({"kafkaVersion": "4.4.0"}, f"'4.4.0' is not a Kafka version Strimzi 1.2.0 runs (valid: {VALID})"),
        ({"controllers": 2}, "2 controllers: a KRaft quorum needs an odd number (1, 3, 5 ...)"),
        ({"namespace": "Kafka_NS"}, "String should match pattern"),
        ({"storage": {"size": "lots"}}, "String should match pattern"),
        ({"resources": {"requests": {"cpu": "two"}}}, "cpu: 'two' is not a Kubernetes quantity (e.g. 2, 500m, 4Gi)"),
        ({"storage": {"sise": "1Gi"}}, "Extra inputs are not permitted"),
    ],
)  # fmt: skip
def test_what_strimzi_cannot_run_is_refused_by_the_profile(keys, said):
    with pytest.raises(ValidationError) as e:
        profile(**keys)
    assert said in str(e.value)
