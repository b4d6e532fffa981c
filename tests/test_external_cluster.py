"""A run through an `external` profile on a cluster whose broker ids do not start at 1: dimster
takes broker ids, count and replication from the cluster itself, not from the local layout.
The test starts that cluster itself (a local profile with firstNodeId 4) and stops it at the end."""

import json
import time

import pytest

from dimster.kafka.admin import admin_client
from tests.conftest import dimster, spare_ports, spare_ports_yaml, write_environment
from tests.runs import write_workload

pytestmark = pytest.mark.kafka

NODES = 3


@pytest.fixture
def brokers_4_to_6(project):
    """A 3-node cluster with node ids 4, 5, 6 (profile `ids4to6`) and an `external` profile `ext`
    pointing at it; yields (CLI environment, bootstrap servers). Stopped by `cluster down` whatever happens."""
    ports = spare_ports(2)  # a slot of this session's port block no other test uses
    write_environment(
        project,
        "ids4to6",
        f"backend: local\nnodes: {NODES}\nfirstNodeId: 4\nheap: 512m\nhost: 127.0.0.1\n{spare_ports_yaml(2)}",
    )
    first_port = ports["brokerPortBase"]
    bootstrap = f"127.0.0.1:{first_port + 1},127.0.0.1:{first_port + 2}"  # not the first broker
    write_environment(project, "ext", f"backend: external\nbootstrapServers: {bootstrap}\n")
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    try:
        up = dimster("cluster", "up", "ids4to6", env=env)
        assert up.code == 0, up.stderr
        yield env, bootstrap
    finally:
        dimster("stop", "ext", env=env)
        down = dimster("cluster", "down", "ids4to6", "--purge", env=env)
        assert down.code == 0, down.stderr


def topics_left(bootstrap: str, topics: list[str]) -> set[str]:
    """Which of `topics` the cluster still lists, waiting up to 15 s for deletions to show."""
    deadline = time.monotonic() + 15
    while True:
        left = set(topics) & set(admin_client(bootstrap).list_topics(timeout=10).topics)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def test_a_run_through_an_external_profile_on_brokers_4_to_6(brokers_4_to_6, tmp_path):
    env, bootstrap = brokers_4_to_6
    local = dimster("cluster", "status", "ids4to6", "--json", env=env)
    assert local.code == 0, local.stderr
    assert [n["node_id"] for n in json.loads(local.stdout)["nodes"]] == [4, 5, 6]

    external = dimster("cluster", "status", "ext", "--json", env=env)
    assert external.code == 0, external.stderr
    status = json.loads(external.stdout)
    assert status["backend"] == "external" and status["healthy"]
    assert [n["node_id"] for n in status["nodes"]] == [4, 5, 6]

    workload = write_workload(tmp_path, "external", warmupSeconds=1, durationSeconds=5)
    results = tmp_path / "results"
    run = dimster("run", "ext", "-w", str(workload), "--results", str(results), "--no-summary", env=env)
    assert run.code == 0, run.stderr + run.stdout
    assert "Traceback" not in run.stderr
    [bundle] = list(results.iterdir())
    info = json.loads((bundle / "run.json").read_text())
    assert info["status"] == "completed"
    totals = info["totals"]
    assert totals["lost"] == 0 and totals["sent"] == totals["acked"] == totals["received"] > 0
    assert info["topics"] and not topics_left(bootstrap, info["topics"])
