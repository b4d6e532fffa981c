"""The pod specs `dimster k8s render` writes actually run (issue 50): `podman kube play` of the agents'
and the coordinator's pods, made from the rendered StatefulSet's and Job's templates, with dimster's
own worker image, the rendered ConfigMap and claim, against the session's `local` broker. The
coordinator pod's run closes its account with nothing lost, and the bundle it leaves on the claim's
volume is one `dimster summarize` reads.

What differs from a Kubernetes cluster, and only that: the pods share this host's network (there is
no cluster DNS for the agents' Service names, and the broker listens on loopback), so each agent
listens on a port of its own and the coordinator's profile names them by it; the Secret's volume is a
folder of this host's holding its one file, `token` (podman 4.3's kube play crashes on a secret
volume: a nil pointer in VolumeFromSecret); the state folder's emptyDir is a named volume."""

import copy
import json
import secrets
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, dimster, unused_port
from tests.runs import no_loss, summarized

pytestmark = pytest.mark.kafka

WORKLOAD = {
    "name": "pods", "topics": 1, "partitionsPerTopic": 2, "producersPerTopic": 1, "producerRate": 200,
    "consumerType": "SHARE_GROUP", "consumersPerGroup": 1, "messageSize": 128, "warmupSeconds": 1,
    "durationSeconds": 5, "reportIntervalSeconds": 1,
}  # fmt: skip


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def on_host_network(template: dict, name: str, token_dir: Path) -> dict:
    """A Pod of a workload's pod template, on this host's network, its Secret's volume `token_dir`."""
    spec = copy.deepcopy(template["spec"])
    spec["hostNetwork"] = True
    for container in spec["containers"]:  # podman maps a declared port, which the host's network cannot
        container.pop("ports", None)
    for volume in spec["volumes"]:
        if "secret" in volume:
            volume.pop("secret")
            volume["hostPath"] = {"path": str(token_dir), "type": "Directory"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": template["metadata"]["labels"]},
            "spec": spec}  # fmt: skip


def test_the_rendered_agents_and_coordinator_run_a_workload_as_pods(
    podman_service, dimster_images, local_cluster, spark, tmp_path, monkeypatch
):
    project = tmp_path / "project"
    shutil.copytree(REPO / "run", project / "run")
    profile = {"backend": "external", "bootstrapServers": local_cluster, "kafkaVersion": dimster_images.kafka_version,
               "kubernetes": {"image": dimster_images.worker, "agents": 2, "namespace": "dimster"}}  # fmt: skip
    (project / "run/environments/pods.yaml").write_text(yaml.safe_dump(profile))
    workload = tmp_path / "pods.yaml"
    workload.write_text(yaml.safe_dump(WORKLOAD))
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))
    out = tmp_path / "k8s"
    assert dimster("k8s", "render", "pods", "-w", str(workload), "-o", str(out)).code == 0
    [_, stateful_set, _] = documents(out / "agents.yaml")
    [config_map, claim, job, holder] = documents(out / "coordinator.yaml")

    token_dir = tmp_path / "token"  # what the Secret's volume holds
    token_dir.mkdir(mode=0o700)
    (token_dir / "token").write_text(secrets.token_hex(24))
    # the agents, each on a port of its own; the coordinator's profile names them so
    ports = [unused_port() for _ in range(stateful_set["spec"]["replicas"])]
    pods = []
    for i, port in enumerate(ports):
        pod = on_host_network(stateful_set["spec"]["template"], f"dimster-agent-{i}", token_dir)
        args = pod["spec"]["containers"][0]["args"]
        args[args.index("--listen") + 1] = f"127.0.0.1:{port}"
        pods.append(pod)
    in_cluster = yaml.safe_load(config_map["data"]["environment.yaml"])
    assert [w["address"] for w in in_cluster["workers"]] == [
        f"dimster-agent-{i}.dimster-agents.dimster.svc:7700" for i in range(len(ports))
    ]
    in_cluster["workers"] = [{"address": f"127.0.0.1:{port}"} for port in ports]
    config_map["data"]["environment.yaml"] = yaml.safe_dump(in_cluster)
    coordinator = on_host_network(job["spec"]["template"], "dimster-run", token_dir)
    for volume in coordinator["spec"]["volumes"]:
        if "emptyDir" in volume:
            volume.pop("emptyDir")
            volume["persistentVolumeClaim"] = {"claimName": "dimster-run-state"}
    state = {**copy.deepcopy(claim), "metadata": {"name": "dimster-run-state"}}
    for obj in (config_map, claim):
        obj["metadata"].pop("namespace")
    play = tmp_path / "play.yaml"
    play.write_text(yaml.safe_dump_all([config_map, claim, state, *pods, coordinator, holder], sort_keys=False))
    try:
        played = podman_service.podman("kube", "play", str(play), timeout=300)
        assert played.returncode == 0, played.stderr
        waited = podman_service.podman("wait", "dimster-run-coordinator", timeout=300)
        logs = podman_service.podman("logs", "dimster-run-coordinator").stdout
        assert waited.stdout.strip() == "0", logs[-3000:]
        mountpoint = podman_service.podman("volume", "inspect", "dimster-results", "--format", "{{.Mountpoint}}")
        [bundle] = [path for path in Path(mountpoint.stdout.strip()).iterdir() if path.is_dir()]
        # the holder pod has the claim for `kubectl cp`: its copy is the bundle
        listed = podman_service.podman("exec", "dimster-results-results", "ls", f"/results/{bundle.name}")
        assert "run.json" in listed.stdout.split(), listed.stderr
        info = json.loads((bundle / "run.json").read_text())
        no_loss(info)
        # each agent pod ran a worker of the run, known by its pod's name
        agents = {(w["host"], w["address"]) for w in info["workers"]}
        assert agents == {(f"dimster-agent-{i}", f"127.0.0.1:{port}") for i, port in enumerate(ports)}, agents
        copied = tmp_path / "results" / bundle.name
        shutil.copytree(bundle, copied)
        summary = summarized(copied, spark)  # what `dimster summarize` makes of the copy
        assert sum(summary["delivery_counts"].values()) == info["totals"]["received"], summary["delivery_counts"]
    finally:
        podman_service.podman("kube", "down", str(play), timeout=120)
        for pod in [pod["metadata"]["name"] for pod in (*pods, coordinator, holder)]:  # a play that stopped half-way
            podman_service.podman("pod", "rm", "-f", pod)
        for volume in ("dimster-results", "dimster-run-state"):
            podman_service.podman("volume", "rm", "-f", volume)
