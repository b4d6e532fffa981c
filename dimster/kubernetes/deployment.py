"""What `dimster k8s render` writes for a workload and an environment profile of backend `strimzi` or
`external` with a `kubernetes:` section: plain manifests and a kustomization.yaml that lists them (one
`kubectl apply -k DIR`), not a chart: dimster itself fills in what a template would, from the profile
and the workload it already checks. In the namespace: the agents (a headless Service, a StatefulSet
spread over the nodes, a PodDisruptionBudget that keeps a run's agents from eviction), the coordinator
as a Job that runs the workload or campaign from a ConfigMap and writes its bundle to a volume claim, a pod that
holds that claim for `kubectl cp`, and for `strimzi` the brokers' resources and the Role the
coordinator needs to bring them up and redeploy them. The worker token is never rendered: the
agents and the coordinator read the Secret the user made (`tokenSecret`)."""

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dimster import __version__, yamlcore
from dimster.errors import DimsterError
from dimster.profile import ProfileBase

AGENT_PORT = 7700
PROJECT = "/etc/dimster/project"  # the ConfigMap's files, as dimster's project folder in the pod
TOKEN_DIR = "/run/secrets/dimster"
RESULTS = "/results"
AGENTS = "dimster-agent"  # the StatefulSet; its pods dimster-agent-0, -1, ...
AGENTS_SERVICE = "dimster-agents"  # the headless Service that names each agent pod
RESULTS_CLAIM = "dimster-results"  # the bundle's volume claim, and the pod that holds it
APP = "app.kubernetes.io/name"
MANAGED = {"app.kubernetes.io/managed-by": "dimster"}
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # a namespace's or an object's name
CONFIG_MAP_BYTES = 1024 * 1024 - 4096  # Kubernetes' limit of a ConfigMap (1 MiB), less room for its metadata
QUANTITY = r"^([0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"  # a Kubernetes quantity (100Gi, 500m)


class PodResources(BaseModel):
    """A container's (or a Strimzi node pool's) resources: quantities by resource name."""

    model_config = ConfigDict(extra="forbid")
    requests: dict[str, str] = Field(default_factory=dict)
    limits: dict[str, str] = Field(default_factory=dict)

    @field_validator("requests", "limits")
    @classmethod
    def _quantities(cls, values: dict[str, str]) -> dict[str, str]:
        for name, value in values.items():
            if not re.match(QUANTITY, str(value)):
                raise ValueError(f"{name}: '{value}' is not a Kubernetes quantity (e.g. 2, 500m, 4Gi)")
        return values


class KubernetesDeploy(BaseModel):
    """A profile's `kubernetes:` section: where and how its agents and coordinator run as pods."""

    model_config = ConfigDict(extra="forbid", validate_by_name=False, validate_by_alias=True)
    namespace: str | None = Field(None, pattern=DNS_LABEL, max_length=63)
    image: str | None = Field(None, min_length=1)  # default: `dimster image build`'s worker image
    agents: int = Field(4, ge=1, le=1000)
    workers_per_agent: int = Field(1, alias="workersPerAgent", ge=1, le=64)
    agent_resources: PodResources = Field(
        default_factory=lambda: PodResources(requests={"cpu": "2", "memory": "4Gi"}, limits={"memory": "8Gi"}),
        alias="agentResources",
    )
    coordinator_resources: PodResources = Field(
        default_factory=lambda: PodResources(requests={"cpu": "1", "memory": "2Gi"}, limits={"memory": "4Gi"}),
        alias="coordinatorResources",
    )
    token_secret: str = Field("dimster-worker-token", alias="tokenSecret", min_length=1)  # its key: `token`
    results_size: str = Field("10Gi", alias="resultsSize", pattern=QUANTITY)
    results_class: str | None = Field(None, alias="resultsClass", min_length=1)
    spark_master: str | None = Field(None, alias="sparkMaster")  # None: no summary in the cluster


def _meta(name: str, namespace: str, component: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": {**_selector(component), **MANAGED}}


def _selector(component: str) -> dict[str, str]:
    return {APP: "dimster", "app.kubernetes.io/component": component}


def namespace_of(profile: ProfileBase, deploy: KubernetesDeploy) -> str:
    return deploy.namespace or getattr(profile, "namespace", None) or "dimster"


def image_of(profile: ProfileBase, deploy: KubernetesDeploy) -> str:
    return deploy.image or f"dimster-worker:{__version__}-kafka{profile.kafka_version}"


def _token_volume(deploy: KubernetesDeploy) -> dict[str, Any]:
    return {"name": "token", "secret": {"secretName": deploy.token_secret, "defaultMode": 0o400}}


def agents(profile: ProfileBase, deploy: KubernetesDeploy) -> list[dict[str, Any]]:
    """The headless Service (a stable name per agent), the StatefulSet and its PodDisruptionBudget."""
    ns, selector = namespace_of(profile, deploy), _selector("agent")
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": _meta(AGENTS_SERVICE, ns, "agent"),
        "spec": {"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": True,
                 "ports": [{"name": "agent", "port": AGENT_PORT, "targetPort": AGENT_PORT}]},
    }  # fmt: skip
    container = {
        "name": "agent",
        "image": image_of(profile, deploy),
        "command": ["python3", "-m", "dimster"],
        "args": ["worker", "serve", "--listen", f"0.0.0.0:{AGENT_PORT}", "--token-file", f"{TOKEN_DIR}/token",
                 "--workers", str(deploy.workers_per_agent)],
        "ports": [{"name": "agent", "containerPort": AGENT_PORT}],
        "resources": deploy.agent_resources.model_dump(exclude_defaults=True),
        "readinessProbe": {"tcpSocket": {"port": AGENT_PORT}, "periodSeconds": 10},
        "volumeMounts": [{"name": "token", "mountPath": TOKEN_DIR, "readOnly": True}],
    }  # fmt: skip
    spread = {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                 "labelSelector": {"matchLabels": selector}}}  # fmt: skip
    stateful = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _meta(AGENTS, ns, "agent"),
        "spec": {
            "serviceName": AGENTS_SERVICE, "replicas": deploy.agents, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": {**selector, **MANAGED}},
                "spec": {
                    # agents compete for cores: one to a node where the cluster has the nodes
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [spread]}},
                    "terminationGracePeriodSeconds": 60,
                    "containers": [container],
                    "volumes": [_token_volume(deploy)],
                },
            },
        },
    }  # fmt: skip
    budget = {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta(AGENTS_SERVICE, ns, "agent"),
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": selector}},  # a drain waits for the run's end
    }  # fmt: skip
    return [service, stateful, budget]


def in_cluster_profile(profile: ProfileBase, deploy: KubernetesDeploy) -> dict[str, Any]:
    """The environment profile the coordinator pod runs with: the user's, its workers the agents (by
    their Service names), its token the Secret's file, its broker config the ConfigMap's."""
    ns = namespace_of(profile, deploy)
    data = profile.model_dump(by_alias=True, exclude_unset=True, exclude={"name", "kube_context", "kubernetes"})
    data |= {"backend": profile.backend, "kafkaVersion": profile.kafka_version}
    data["workers"] = [
        {"address": f"{AGENTS}-{i}.{AGENTS_SERVICE}.{ns}.svc:{AGENT_PORT}"} for i in range(deploy.agents)
    ]
    data["workerTokenFile"] = f"{TOKEN_DIR}/token"
    data["brokerConfig"] = "run/broker-configs/broker-config.yaml"
    return data


@dataclass(frozen=True)
class JobInput:
    """What the coordinator Job runs: a workload (`dimster run`) or a campaign (`dimster campaign`),
    as the text of its file, which needs no other file."""

    kind: Literal["workload", "campaign"]
    text: str

    @property
    def file(self) -> str:
        return f"{self.kind}.yaml"

    @property
    def folder(self) -> str:  # of the project's run/
        return f"{self.kind}s"

    def args(self, env: str) -> list[str]:
        path = f"{PROJECT}/run/{self.folder}/{self.file}"
        return ["run", env, "-w", path] if self.kind == "workload" else ["campaign", env, "-c", path]


def coordinator(
    profile: ProfileBase, deploy: KubernetesDeploy, env: str, to_run: JobInput, broker_config_text: str
) -> list[dict[str, Any]]:
    """The ConfigMap of the run's files, the results' claim, the Job, and the pod that holds the claim."""
    ns, name = namespace_of(profile, deploy), "dimster-run"
    files = {
        "environment.yaml": yamlcore.dump(in_cluster_profile(profile, deploy)),
        "broker-config.yaml": broker_config_text,
        to_run.file: to_run.text,
    }
    size = sum(len(text.encode()) for text in files.values())
    if size > CONFIG_MAP_BYTES:
        raise DimsterError(
            f"the coordinator's files take {size:,} bytes (its {to_run.kind} {len(to_run.text.encode()):,}), "
            f"more than a ConfigMap holds ({CONFIG_MAP_BYTES:,}): a payload.file that large belongs in the image"
        )
    # each file in its folder of the project, a volume a folder: a ConfigMap item's path is a file name
    folders = {"environment.yaml": ("environments", f"{env}.yaml"), to_run.file: (to_run.folder, to_run.file),
               "broker-config.yaml": ("broker-configs", "broker-config.yaml")}  # fmt: skip
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, ns, "coordinator"), "data": files}
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": deploy.results_size}},
    }
    if deploy.results_class:
        claim_spec["storageClassName"] = deploy.results_class
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(RESULTS_CLAIM, ns, "results"),
             "spec": claim_spec}  # fmt: skip
    summary = ["--spark-master", deploy.spark_master] if deploy.spark_master else ["--no-summary"]
    container = {
        "name": "coordinator",
        "image": image_of(profile, deploy),
        "command": ["python3", "-m", "dimster"],
        "args": [*to_run.args(env), "--results", RESULTS, *summary],
        "env": [{"name": "DIMSTER_PROJECT_DIR", "value": PROJECT}, {"name": "DIMSTER_STATE_DIR", "value": "/state"}],
        "resources": deploy.coordinator_resources.model_dump(exclude_defaults=True),
        "volumeMounts": [
            *({"name": f, "mountPath": f"{PROJECT}/run/{f}", "readOnly": True} for f, _ in folders.values()),
            {"name": "token", "mountPath": TOKEN_DIR, "readOnly": True},
            {"name": "results", "mountPath": RESULTS},
            {"name": "state", "mountPath": "/state"},
        ],
    }  # fmt: skip
    volumes = [
        *(
            {"name": folder, "configMap": {"name": name, "items": [{"key": key, "path": file}]}}
            for key, (folder, file) in folders.items()
        ),
        _token_volume(deploy),
        {"name": "results", "persistentVolumeClaim": {"claimName": RESULTS_CLAIM}},
        {"name": "state", "emptyDir": {}},
    ]
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container], "volumes": volumes}
    if profile.backend == "strimzi":
        pod_spec["serviceAccountName"] = "dimster-coordinator"
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(name, ns, "coordinator"),
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": _selector("coordinator")}, "spec": pod_spec}},
    }  # fmt: skip
    reader = {"name": "results", "image": image_of(profile, deploy), "command": ["sleep", "infinity"],
              "volumeMounts": [{"name": "results", "mountPath": RESULTS, "readOnly": True}]}  # fmt: skip
    holder = {
        "apiVersion": "v1", "kind": "Pod", "metadata": _meta(RESULTS_CLAIM, ns, "results"),
        "spec": {"containers": [reader],
                 "volumes": [{"name": "results", "persistentVolumeClaim": {"claimName": RESULTS_CLAIM}}]},
    }  # fmt: skip
    return [config_map, claim, job, holder]


def coordinator_role(profile: ProfileBase, deploy: KubernetesDeploy) -> list[dict[str, Any]]:
    """What the coordinator of a `strimzi` profile may do in its namespace: its Kafka resources, the
    broker pods (status, logs, a kill) and their volume claims (`cluster down --purge`)."""
    ns = namespace_of(profile, deploy)
    rules = [
        {"apiGroups": ["kafka.strimzi.io"], "resources": ["kafkas", "kafkanodepools"],
         "verbs": ["get", "list", "create", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "delete"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["list", "delete"]},
    ]  # fmt: skip
    meta = _meta("dimster-coordinator", ns, "coordinator")
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "dimster-coordinator"},
         "subjects": [{"kind": "ServiceAccount", "name": "dimster-coordinator", "namespace": ns}]},
    ]  # fmt: skip
