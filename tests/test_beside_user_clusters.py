"""The suite runs beside a user's clusters of the shipped profiles and never touches them: while a
cluster of the shipped `local` profile is up on its own ports (19092+), the session's `local` profile
is up on its own ports, runs a workload and goes down (the next test that asks for it brings it up
again), and the shipped-port cluster is still there, unchanged."""

import json
import shutil

import psutil
import pytest
import yaml

from dimster.environment import EnvironmentProfile, parse_profile
from dimster.pipeline.spark_service import SparkService
from tests.conftest import REPO, dimster, port_is_free, without_data_dir
from tests.runs import run_info, run_until

pytestmark = pytest.mark.kafka


def shipped_local_profile() -> EnvironmentProfile:
    data = yaml.safe_load((REPO / "run" / "environments" / "local.yaml").read_text())
    return parse_profile({**data, "name": "local"})


def listeners(ports: list[int]) -> dict[int, int | None]:
    """Which process listens on each port (None: nothing, or a process we may not see)."""
    found: dict[int, int | None] = dict.fromkeys(ports)
    for connection in psutil.net_connections(kind="tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port in found:
            found[connection.laddr.port] = connection.pid
    return found


@pytest.fixture
def shipped_local_cluster(tmp_path):
    """A cluster on the shipped `local` profile's ports: the user's own when those ports are taken
    (used as it is), else one this fixture starts with its own state folder and stops by PID."""
    shipped = shipped_local_profile()
    ports = [shipped.broker_port(0), shipped.controller_port(0)]
    if not all(port_is_free(port) for port in ports):
        yield shipped, ports, None  # a user's cluster (or something else) holds the ports: not ours
        return
    # The shipped profile as it is, but its data under this test's state folder even if the user's
    # copy of local.yaml names a dataDir.
    project = tmp_path / "shipped"
    shutil.copytree(REPO / "run", project / "run")
    profile = project / "run" / "environments" / "local.yaml"
    profile.write_text(without_data_dir(profile.read_text()))
    env = {"DIMSTER_PROJECT_DIR": str(project), "DIMSTER_STATE_DIR": str(tmp_path / "shipped-state")}
    pids: list[int] = []
    try:
        result = dimster("cluster", "up", "local", env=env)
        assert result.code == 0, result.stderr
        status = json.loads(dimster("cluster", "status", "local", "--json", env=env).stdout)
        assert status["bootstrap_servers"] == shipped.bootstrap_servers
        pids = [node["pid"] for node in status["nodes"]]
        yield shipped, ports, env
    finally:
        dimster("cluster", "down", "local", env=env)
        for pid in pids:  # still there after `down`: ended here, by PID
            if psutil.pid_exists(pid):
                psutil.Process(pid).kill()


def test_the_suite_runs_beside_a_shipped_local_cluster(shipped_local_cluster, tmp_path, local_cluster):
    shipped, ports, shipped_env = shipped_local_cluster
    before = listeners(ports)
    if shipped_env:
        started = json.loads(dimster("cluster", "status", "local", "--json", env=shipped_env).stdout)
        assert started["healthy"]

    status = json.loads(dimster("cluster", "status", "local", "--json").stdout)  # the session's own
    assert status["healthy"] and status["bootstrap_servers"] == local_cluster
    assert not set(local_cluster.split(",")) & set(shipped.bootstrap_servers.split(","))
    bundle = run_until(tmp_path / "run", "beside", "received>=500", warmupSeconds=0)
    assert run_info(bundle)["totals"]["lost"] == 0
    with SparkService().held():  # as a summary holds it: the session's Spark server stays up for the next
        assert dimster("cluster", "down", "local").code == 0

    assert listeners(ports) == before  # the same processes hold the shipped ports
    if shipped_env:
        after = json.loads(dimster("cluster", "status", "local", "--json", env=shipped_env).stdout)
        assert after["healthy"]
        assert [n["pid"] for n in after["nodes"]] == [n["pid"] for n in started["nodes"]]
