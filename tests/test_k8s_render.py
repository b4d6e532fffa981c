"""`dimster k8s render` (issue 50): what a user applies to run a workload in Kubernetes. Every object it
writes passes Kubernetes 1.34's own schemas strictly (kubernetes-validate) or, for Strimzi's, the
strict schemas of Strimzi 1.2.0's CRDs; the coordinator pod's files are a profile and a workload
dimster reads; nothing holds the worker token."""

import shutil
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from dimster.cluster.backends import profile_model, profile_models
from tests.conftest import REPO, dimster, one_error_line
from tests.kube_schemas import crd_validators, schema_errors

pytestmark = pytest.mark.unit

WORKLOAD = REPO / "run/workloads/run-test/run-sharegroup-proc-time-5ms-small.yaml"
K8S = """backend: strimzi
namespace: perf
nodes: 3
kafkaVersion: 4.3.1
storage: {size: 20Gi}
kubernetes:
  agents: 3
  workersPerAgent: 2
  image: registry.example.com/dimster-worker:0.1.0-kafka4.3.1
  sparkMaster: sc://spark-connect.spark.svc:15002
"""
EXTERNAL = "backend: external\nbootstrapServers: kafka-0.kafka.svc:9092\nkafkaVersion: 4.4.0\n"


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project folder with the shipped run/ and two profiles for Kubernetes."""
    shutil.copytree(REPO / "run", tmp_path / "run")
    (tmp_path / "run/environments/k8s.yaml").write_text(K8S)
    (tmp_path / "run/environments/ext.yaml").write_text(EXTERNAL)
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(tmp_path))
    monkeypatch.setenv("DIMSTER_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def test_a_strimzi_environment_renders_agents_a_coordinator_job_brokers_and_a_role_that_all_validate(project, tmp_path):
    out = tmp_path / "out"
    result = dimster("k8s", "render", "k8s", "-w", str(WORKLOAD), "-o", str(out))
    assert result.code == 0, result.stderr
    assert "kubectl apply -k" in result.stdout and "create secret generic dimster-worker-token" in result.stdout
    kustomization = yaml.safe_load((out / "kustomization.yaml").read_text())
    files = ["agents.yaml", "coordinator.yaml", "strimzi.yaml", "coordinator-role.yaml"]
    assert kustomization["resources"] == files and kustomization["namespace"] == "perf"
    strimzi = crd_validators("strimzi-1.2.0")
    kinds = []
    for name in files:
        for obj in documents(out / name):
            kinds.append(obj["kind"])
            if obj["apiVersion"].startswith("kafka.strimzi.io/"):
                assert schema_errors(strimzi, obj) == [], obj["kind"]
            else:  # raises on the first error, naming it
                kubernetes_validate.validate(obj, "1.34.0", strict=True)
            assert obj["metadata"]["namespace"] == "perf"
    assert sorted(kinds) == sorted([
        "Service", "StatefulSet", "PodDisruptionBudget", "ConfigMap", "PersistentVolumeClaim", "Job", "Pod",
        "KafkaNodePool", "Kafka", "ServiceAccount", "Role", "RoleBinding",
    ])  # fmt: skip
    [service, agents, budget] = documents(out / "agents.yaml")
    assert service["spec"]["clusterIP"] == "None"  # headless: a DNS name per agent
    assert agents["spec"]["replicas"] == 3 and budget["spec"]["maxUnavailable"] == 0
    [agent] = agents["spec"]["template"]["spec"]["containers"]
    assert agent["image"] == "registry.example.com/dimster-worker:0.1.0-kafka4.3.1"
    assert agent["args"][agent["args"].index("--workers") + 1] == "2"
    [config_map, claim, job, holder] = documents(out / "coordinator.yaml")
    [coordinator] = job["spec"]["template"]["spec"]["containers"]
    spark = ["--spark-master", "sc://spark-connect.spark.svc:15002"]
    workload = "/etc/dimster/project/run/workloads/workload.yaml"
    assert coordinator["args"] == ["run", "k8s", "-w", workload, "--results", "/results", *spark]
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "dimster-coordinator"
    assert holder["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    # the coordinator's files: a profile and a workload that dimster reads, the workload the one given
    profile = yaml.safe_load(config_map["data"]["environment.yaml"])
    model = profile_model(profile).model_validate({**profile, "name": "k8s"}, context={"profiles": profile_models})
    assert model.agents == [f"dimster-agent-{i}.dimster-agents.perf.svc:7700" for i in range(3)]
    assert model.kafka_version == "4.3.1" and model.storage.size == "20Gi"  # type: ignore[attr-defined]
    assert model.worker_token_file == "/run/secrets/dimster/token" and "kubernetes" not in profile
    assert config_map["data"]["workload.yaml"] == WORKLOAD.read_text()
    # nothing holds a token: the agents and the coordinator read the user's Secret
    secrets = [v["secret"]["secretName"] for v in agents["spec"]["template"]["spec"]["volumes"] if "secret" in v]
    assert secrets == ["dimster-worker-token"] and "Secret" not in kinds


def test_an_external_environment_renders_no_brokers_and_no_role(project, tmp_path):
    out = tmp_path / "out"
    assert dimster("k8s", "render", "ext", "-w", str(WORKLOAD), "-o", str(out)).code == 0
    assert yaml.safe_load((out / "kustomization.yaml").read_text())["resources"] == ["agents.yaml", "coordinator.yaml"]
    [_, _, job, _] = documents(out / "coordinator.yaml")
    spec = job["spec"]["template"]["spec"]
    assert "serviceAccountName" not in spec and spec["containers"][0]["args"][-1] == "--no-summary"
    assert spec["containers"][0]["image"] == "dimster-worker:0.1.0-kafka4.4.0"  # `dimster image build`'s
    assert documents(out / "coordinator.yaml")[0]["metadata"]["namespace"] == "dimster"


def test_a_local_environment_or_a_forbidden_broker_property_is_one_line_and_nothing_written(project, tmp_path):
    out = tmp_path / "out"
    result = dimster("k8s", "render", "local", "-w", str(WORKLOAD), "-o", str(out))
    one_error_line(result, "run/environments/local.yaml: backend 'local' runs its brokers on this host",
                   "needs backend strimzi or external")  # fmt: skip
    (project / "run/environments/k8s.yaml").write_text(K8S + "brokerOverrides: {listeners: 'PLAINTEXT://:9092'}\n")
    result = dimster("k8s", "render", "k8s", "-w", str(WORKLOAD), "-o", str(out))
    one_error_line(result, "'listeners' is set by the Strimzi operator")
    (project / "run/environments/k8s.yaml").write_text(K8S.replace("agents: 3", "agents: 0"))
    one_error_line(dimster("k8s", "render", "k8s", "-w", str(WORKLOAD), "-o", str(out)), "kubernetes.agents")
    assert not out.exists()


def test_a_campaign_renders_as_one_file_the_job_runs_with_the_same_points(project, tmp_path):
    """The campaign's base is taken into its file (the pod has no other), with its mode and thresholds
    once; read back, the file gives the points the user's file gives, broker-config dimension included."""
    from dimster.campaign.model import load_campaign

    source = project / "run/campaigns/share-lock-budget.yaml"
    out = tmp_path / "out"
    result = dimster("k8s", "render", "k8s", "-c", str(source), "-o", str(out))
    assert result.code == 0, result.stderr
    assert "campaign 'share-lock-budget' on 'k8s'" in result.stdout
    [config_map, _, job, _] = documents(out / "coordinator.yaml")
    for obj in (config_map, job):
        kubernetes_validate.validate(obj, "1.34.0", strict=True)
    [container] = job["spec"]["template"]["spec"]["containers"]
    campaign = "/etc/dimster/project/run/campaigns/campaign.yaml"
    assert container["args"][:4] == ["campaign", "k8s", "-c", campaign] and "workload.yaml" not in config_map["data"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/etc/dimster/project/run/campaigns" in mounts
    rendered = tmp_path / "campaign.yaml"
    rendered.write_text(config_map["data"]["campaign.yaml"])
    mine, theirs = load_campaign(source), load_campaign(rendered)
    assert [(p.label, p.workload) for p in theirs.points] == [(p.label, p.workload) for p in mine.points]
    assert len(theirs.points) == 4 and isinstance(yaml.safe_load(rendered.read_text())["base"], dict)


def test_what_a_run_on_the_environment_would_refuse_is_one_line_at_render_and_at_validate(project, tmp_path):
    """Refused before anything is written or applied: a broker property Strimzi sets itself, in the
    workload's brokerConfig; more replicas than brokers; a secret the ConfigMap would keep on disk;
    an OMB campaign, whose files the pod does not have. `validate --env` refuses the same."""
    out = tmp_path / "out"
    bad = {
        "strimzi": ({"brokerConfig": {"advertised.listeners": "PLAINTEXT://x:9092"}},
                    "'advertised.listeners' is set by the Strimzi operator"),
        "replicas": ({"replicationFactor": 5}, "replicationFactor 5 needs 5 brokers; 'k8s' has 3"),
    }  # fmt: skip
    base = {"name": "refused", "consumerType": "SHARE_GROUP", "clientLibrary": "librdkafka"}  # no JVM to check
    for name, (keys, fragment) in bad.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({**base, **keys}))
        one_error_line(dimster("k8s", "render", "k8s", "-w", str(path), "-o", str(out)), path.name, fragment)
        one_error_line(dimster("validate", str(path), "--env", "k8s"), path.name, fragment)
    secret = tmp_path / "secret.yaml"
    secret.write_text(
        yaml.safe_dump({**base, "kafkaConfig": {"commonConfig": {"sasl.password": "dimster-secret-5f1c9a2e"}}})
    )
    result = dimster("k8s", "render", "ext", "-w", str(secret), "-o", str(out))
    line = one_error_line(result, "kafkaConfig.commonConfig.sasl.password holds a secret")
    assert "dimster-secret-5f1c9a2e" not in result.stdout + result.stderr and "5f1c9a2e" not in line
    omb = tmp_path / "omb.yaml"
    omb.write_text(yaml.safe_dump({"name": "omb", "omb": {"workloads": [str(WORKLOAD)]}}))
    one_error_line(dimster("k8s", "render", "ext", "-c", str(omb), "-o", str(out)), "an omb campaign")
    one_error_line(
        dimster("k8s", "render", "ext", "-o", str(out)), "needs one of -w WORKLOAD.yaml and -c CAMPAIGN.yaml"
    )
    assert not out.exists()
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(base))
    ok = dimster("validate", str(good), "--env", "k8s")
    assert ok.code == 0 and "ok on 'k8s' (strimzi, Kafka 4.3.1)" in ok.stdout, ok.stderr
    (project / "run/environments/k8s.yaml").write_text(K8S.replace("kafkaVersion: 4.3.1", "kafkaVersion: 4.4.0"))
    one_error_line(dimster("validate", str(good), "--env", "k8s"), "'4.4.0' is not a Kafka version Strimzi 1.2.0 runs")
