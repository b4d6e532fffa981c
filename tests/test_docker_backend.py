"""The `docker` backend for real, on the session's private podman service (its Docker-compatible API)
with dimster's locally built Kafka image: a three-node cluster comes up healthy, records round trip,
a read-only redeploy during a run recreates the containers one at a time and loses nothing, `down`
removes exactly what dimster created. The tests share one cluster, brought up (or reused) by the
`docker_cluster` fixture; the one that takes it down leaves the next to bring it up again."""

import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

import docker.errors
import pytest
import yaml

from dimster.environment import DockerWorkers
from tests.conftest import copy_project, dimster, set_broker_config, spare_ports, write_environment
from tests.kafka_clients import broker_config, consume_group, create_topic, produce_numbers
from tests.runs import status, wait, write_workload

pytestmark = pytest.mark.kafka

# a name of this session's own: a podman killed mid-run leaves its network's DNS records in the
# machine-wide /run/containers/networks, and a network of the same name would inherit them
ENV = f"dk{secrets.token_hex(3)}"
LABEL = "io.dimster.environment"


@dataclass
class DockerEnv:
    project: Path
    env: dict[str, str]
    client: docker.DockerClient

    def cli(self, *args: str, timeout: float = 300):
        return dimster(*args, env=self.env, timeout=timeout)

    def status(self) -> dict:
        return json.loads(self.cli("cluster", "status", ENV, "--json").stdout)

    def containers(self, environment: str = ENV) -> dict[str, str]:
        """Name -> id of the containers dimster labelled for `environment`."""
        found = self.client.containers.list(all=True, filters={"label": f"{LABEL}={environment}"})
        return {c.name: c.id for c in found}

    def volumes(self) -> list[str]:
        return sorted(v.name for v in self.client.volumes.list(filters={"label": f"{LABEL}={ENV}"}))


def docker_profile(service_url: str, image: str, nodes: int = 3) -> str:
    ports = spare_ports(5, "docker")  # a slot no other test module uses
    return yaml.safe_dump(
        {
            "backend": "docker",
            "dockerHost": service_url,
            "image": image,
            "nodes": nodes,
            "heap": "512m",
            "brokerPortBase": ports["brokerPortBase"],
            "brokerMetricsPortBase": ports["brokerMetricsPortBase"],
            "workers": 1,
        }
    )


@pytest.fixture(scope="module")
def docker_env(tmp_path_factory, scratch_project, podman_service, dimster_images):
    project = copy_project(scratch_project, tmp_path_factory.mktemp("docker-project"))
    write_environment(project, ENV, docker_profile(podman_service.url, dimster_images.kafka))
    environment = DockerEnv(project, {"DIMSTER_PROJECT_DIR": str(project)}, podman_service.client)
    yield environment
    dimster("stop", ENV, env=environment.env)
    environment.cli("cluster", "down", ENV, "--purge")


@pytest.fixture
def docker_cluster(docker_env) -> DockerEnv:
    """The module's cluster up (started, or reused as it mostly is) for this test."""
    result = docker_env.cli("cluster", "up", ENV)
    assert result.code == 0, result.stderr
    return docker_env


def test_three_node_containers_come_up_healthy_with_labels_volumes_and_logs(docker_env):
    result = docker_env.cli("cluster", "up", ENV, "--json")
    assert result.code == 0, result.stderr
    state = json.loads(result.stdout)
    assert state["healthy"] and state["backend"] == "docker"
    assert [n["node_id"] for n in state["nodes"]] == [1, 2, 3]
    assert all(n["alive"] and n["registered"] for n in state["nodes"])
    assert sorted(docker_env.containers()) == [f"dimster-{ENV}-node-{i}" for i in (1, 2, 3)]
    assert docker_env.volumes() == [f"dimster-{ENV}-node-{i}-data" for i in (1, 2, 3)]
    again = docker_env.cli("cluster", "up", ENV)  # a healthy running cluster is reused
    assert again.code == 0 and "reusing it" in again.stderr

    logs = docker_env.cli("cluster", "logs", ENV, "--node", "2", "--lines", "5")
    lines = logs.stdout.splitlines()
    assert logs.code == 0 and len(lines) == 5 and all(line.startswith("[2] ") for line in lines)


def test_ten_thousand_records_round_trip(docker_cluster):
    bootstrap = docker_cluster.status()["bootstrap_servers"]
    topic = create_topic(bootstrap, partitions=3, replication=3)
    produce_numbers(bootstrap, topic, 10_000)
    values = consume_group(bootstrap, topic, 10_000)
    assert sorted(int(v) for v in values) == list(range(10_000))


def test_a_dynamic_change_goes_through_the_admin_api_and_keeps_the_containers(docker_cluster):
    before = docker_cluster.containers()
    bootstrap = docker_cluster.status()["bootstrap_servers"]
    size = int(broker_config(bootstrap, 3, "message.max.bytes")) + 1000
    set_broker_config(docker_cluster.project, "message.max.bytes", size)
    result = docker_cluster.cli("cluster", "redeploy", ENV, "--json")
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report == {"dynamic": {"message.max.bytes": str(size)}, "restarted": {}, "restarted_nodes": []}
    assert docker_cluster.containers() == before  # the same containers, not recreated
    deadline = time.monotonic() + 30  # a cluster-wide value reaches each broker through the metadata log
    while {broker_config(bootstrap, b, "message.max.bytes") for b in (1, 2, 3)} != {str(size)}:
        assert time.monotonic() < deadline, "the new message.max.bytes did not reach every broker"
        time.sleep(0.5)


def addresses(cluster, containers: dict[int, str]) -> dict[int, str]:
    """Each node container's address on its one network, by node id."""
    seen = {}
    for node, container_id in containers.items():
        [network] = cluster.client.containers.get(container_id).attrs["NetworkSettings"]["Networks"].values()
        seen[node] = network["IPAddress"]
    return seen


def test_a_read_only_redeploy_under_load_recreates_one_container_at_a_time_and_loses_nothing(docker_cluster, tmp_path):
    before = docker_cluster.containers()
    before_addresses = addresses(docker_cluster, before)
    assert len(set(before_addresses.values())) == 3
    workload = write_workload(
        tmp_path,
        "docker-redeploy",
        replicationFactor=3,
        producersPerTopic=1,
        producerRate=300,
        warmupSeconds=0,
        durationSeconds=0,
        reportIntervalSeconds=2,
    )
    started = docker_cluster.cli(
        "run", ENV, "-w", str(workload), "--detach", "--json", "--no-summary", "--results", str(tmp_path / "results")
    )
    assert started.code == 0, started.stderr
    bundle = Path(json.loads(started.stdout)["results"])
    wait("elapsedSeconds>3 and received>0", env=ENV)

    set_broker_config(
        docker_cluster.project, "group.share.record.lock.duration.ms", 20000
    )  # read-only: every node restarts
    redeploy = docker_cluster.cli("cluster", "redeploy", ENV, "--json")
    assert redeploy.code == 0, redeploy.stderr
    report = json.loads(redeploy.stdout)
    assert report["restarted"] == {"group.share.record.lock.duration.ms": "20000"}
    assert report["restarted_nodes"] == [1, 2, 3]
    steps = [line for line in redeploy.stderr.splitlines() if line.startswith("node ")]
    assert [line.split(":")[0] + ":" + line.split(":")[1].split()[0] for line in steps] == [
        f"node {n}:{step}" for n in (1, 2, 3) for step in ("stopping", "up")
    ]  # one node at a time: the next stops only once the last is back
    after = docker_cluster.containers()
    assert sorted(after) == sorted(before) and not set(after.values()) & set(before.values())  # all recreated
    # each keeps its address: the other nodes' connections to it do not wait out a connection time-out
    assert addresses(docker_cluster, after) == before_addresses
    for container_id in after.values():  # a restarted node runs Kafka at once: its volume is formatted
        assert b"already formatted" not in docker_cluster.client.containers.get(container_id).logs()

    wait(f"received>{status(ENV)['received'] + 900}", timeout=120, env=ENV)
    assert docker_cluster.cli("stop", ENV).code == 0
    info = json.loads((bundle / "run.json").read_text())
    assert info["status"] == "completed" and info["brokers"] == [1, 2, 3]
    assert info["totals"]["lost"] == 0 and info["totals"]["sent"] == info["totals"]["acked"] > 0
    events = [json.loads(x) for x in (bundle / "events.jsonl").read_text().splitlines()]
    membership = [(e["event"], e["broker"]) for e in events if e["event"] in ("broker_left", "broker_back")]
    told = f"{membership} in {bundle}"  # whole: pytest shortens a message that is not a string
    # The rolling order is in the log: each node leaves and is back before the next leaves. A busy
    # machine may add a flap, of one broker or two at once (the controller fences brokers whose
    # heartbeats came late, and the watch rightly reports it: CI saw two leave together after the
    # redeploy's three steps), so the order is looked for as a subsequence, and each broker's own
    # events alternate, from a leave to a return.
    rolling = iter(membership)
    assert all(step in rolling for n in (1, 2, 3) for step in (("broker_left", n), ("broker_back", n))), told
    for n in (1, 2, 3):
        own = [event for event, broker in membership if broker == n]
        assert own == ["broker_left", "broker_back"] * (len(own) // 2) and own, told
    assert sorted(p.name for p in (bundle / "logs").glob("broker-*.log")) == [f"broker-{n}.log" for n in (1, 2, 3)]


def test_worker_agents_run_as_containers_on_the_cluster_network_and_are_removed_after_the_run(docker_cluster, tmp_path):
    profile_file = docker_cluster.project / "run/environments" / f"{ENV}.yaml"
    profile = yaml.safe_load(profile_file.read_text())
    profile_file.write_text(yaml.safe_dump({**profile, "workers": {"docker": 2}}))
    try:
        workload = write_workload(
            tmp_path, "docker-workers", consumersPerGroup=2, warmupSeconds=1, durationSeconds=6, reportIntervalSeconds=2
        )
        results = tmp_path / "results"
        result = docker_cluster.cli("run", ENV, "-w", str(workload), "--no-summary", "--results", str(results))
        assert result.code == 0, result.stderr + result.stdout
    finally:
        profile_file.write_text(yaml.safe_dump(profile))
    [bundle] = list(results.iterdir())
    info = json.loads((bundle / "run.json").read_text())
    assert info["status"] == "completed"
    assert (
        info["totals"]["lost"] == 0 and info["totals"]["sent"] == info["totals"]["acked"] == info["totals"]["received"]
    )
    events = [json.loads(x) for x in (bundle / "events.jsonl").read_text().splitlines()]
    agents = [e for e in events if e["event"] == "agent_connected"]
    assert len(agents) == 2 and all(e["address"].startswith("127.0.0.1:") for e in agents)
    assert sorted(p.name for p in (bundle / "logs").glob("worker-*.log")) == ["worker-0.log", "worker-1.log"]
    leftovers = docker_cluster.client.containers.list(all=True, filters={"label": "io.dimster.role=worker"})
    assert leftovers == []  # removed at the end of the run
    assert sorted(docker_cluster.containers()) == [f"dimster-{ENV}-node-{i}" for i in (1, 2, 3)]


def test_the_run_token_reaches_agent_containers_only_through_their_tmpfs(docker_cluster, monkeypatch):
    from dimster.cluster.docker import DockerCluster
    from dimster.coordinator.workers.containers import TOKEN_DIR, WorkerContainers
    from dimster.environment import load_environment

    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(docker_cluster.project))
    profile = load_environment(ENV).model_copy(update={"workers": DockerWorkers(docker=1)})
    pool = WorkerContainers(DockerCluster(profile), "token-check", progress=lambda _line: None)
    try:
        [address] = pool.start()
        [container] = pool.containers
        config = docker_cluster.client.api.inspect_container(container.id)
        assert pool.token not in json.dumps(config)  # not in its environment, command, labels or mounts
        # read through the container's process from the host, not exec's output: podman's exec may cut
        # its output short on a busy host (podman issue 9096; /proc/mounts came back without its last lines)
        inside = Path(f"/proc/{config['State']['Pid']}")
        assert (inside / f"root{TOKEN_DIR}" / "token").read_text().strip() == pool.token
        mounts = (inside / "mounts").read_text().splitlines()
        assert any(line.split()[1] == TOKEN_DIR and line.split()[2] == "tmpfs" for line in mounts), mounts
        status = dimster("worker", "status", address, "--json", env={"DIMSTER_WORKER_TOKEN": pool.token})
        assert status.code == 0 and json.loads(status.stdout)["up"], status.stderr
    finally:
        pool.remove()
    assert docker_cluster.client.containers.list(all=True, filters={"label": "io.dimster.role=worker"}) == []


def test_down_removes_exactly_what_dimster_created_and_purge_the_volumes(docker_cluster, dimster_images):
    client = docker_cluster.client
    foreign_volume = client.volumes.create("not-dimsters")
    foreign = client.containers.create(dimster_images.kafka, ["true"], name="not-dimsters")
    try:
        down = docker_cluster.cli("cluster", "down", ENV)
        assert down.code == 0 and "stopped 3 node(s)" in down.stdout, down.stderr
        assert docker_cluster.containers() == {}
        assert len(docker_cluster.volumes()) == 3  # data is kept without --purge
        assert not client.networks.list(filters={"label": f"{LABEL}={ENV}"})
        assert docker_cluster.cli("cluster", "status", ENV).code == 1

        purge = docker_cluster.cli("cluster", "down", ENV, "--purge")
        assert purge.code == 0, purge.stderr
        assert docker_cluster.volumes() == []
        assert client.containers.get("not-dimsters").id == foreign.id  # what dimster did not create stays
        assert client.volumes.get("not-dimsters").name == foreign_volume.name
    finally:
        foreign.remove(force=True)
        foreign_volume.remove(force=True)


def test_an_image_that_does_not_exist_is_one_line(tmp_path, scratch_project, podman_service):
    project = copy_project(scratch_project, tmp_path)
    write_environment(project, "noimage", docker_profile(podman_service.url, "localhost/dimster-no-such:0", nodes=1))
    result = dimster("cluster", "up", "noimage", env={"DIMSTER_PROJECT_DIR": str(project)}, timeout=120)
    assert result.code != 0 and "Traceback" not in result.stderr
    [line] = result.error_lines
    assert "image localhost/dimster-no-such:0 is not on the Docker daemon" in line
    assert "dimster image build" in line
    assert not podman_service.client.containers.list(all=True, filters={"label": f"{LABEL}=noimage"})
