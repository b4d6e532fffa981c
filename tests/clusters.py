"""The session's warm clusters, one per shape, shared by the tests through topics, groups and run names
of their own: `local` (one node) comes up at its first use; `beefy`, three nodes in network
namespaces of the session's own, too. `local` goes down when the session ends, `beefy` once the
modules that share it are done (conftest.py: three idle brokers cost CPU the other tests need); a
test whose behaviour is a cluster's end (`cluster down`) brings it down itself, and the next test
that asks for the cluster brings it up again.

tests/conftest.py imports these fixtures, so every test module may ask for them."""

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from dimster.cluster.netns import NodeNetwork
from dimster.environment import EnvironmentProfile, load_environment
from tests.cli import copy_project, dimster
from tests.netns import unused_subnet

BEEFY = "localBeefy"
# Node ids 4-6, not 1-3: the external-profile test runs through this cluster, and dimster must take
# broker ids from the cluster itself, never from a layout that starts at 1.
BEEFY_FIRST_NODE_ID = 4
# The controller fences a broker it has not heard from in 4 s (Kafka: 9 s), with heartbeats every
# second (Kafka: 2 s): the fault tests wait for each fence.
FAST_FENCING = "broker.session.timeout.ms: 4000\nbroker.heartbeat.interval.ms: 1000\n"


@pytest.fixture
def local_cluster() -> str:
    """The session's `local` up (started, or reused as it mostly is): its bootstrap servers."""
    result = dimster("cluster", "up", "local")
    assert result.code == 0, result.stderr
    return load_environment("local").bootstrap_servers


@dataclass
class Beefy:
    project: Path  # a scratch copy of the session's run/: tests edit its broker config
    env: dict[str, str]

    def profile(self) -> EnvironmentProfile:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("DIMSTER_PROJECT_DIR", str(self.project))
            return load_environment(BEEFY)

    def network(self) -> NodeNetwork:
        profile = self.profile()
        return NodeNetwork(profile.node_network, profile.cluster_dir, profile.node_ids)

    def status(self) -> dict:
        return json.loads(dimster("cluster", "status", BEEFY, "--json", env=self.env).stdout)

    @property
    def node_ids(self) -> list[int]:
        return [BEEFY_FIRST_NODE_ID + i for i in range(3)]

    @property
    def config_file(self) -> Path:
        return self.project / "run/broker-configs/default.yaml"


def beefy_down(beefy: Beefy) -> None:
    """The three nodes down and their namespaces removed (once its modules are done, and at the end)."""
    with contextlib.suppress(Exception):
        dimster("stop", BEEFY, env=beefy.env)
    down = dimster("cluster", "down", BEEFY, env=beefy.env)
    beefy.network().remove()  # also when a test or `down` failed
    assert down.code == 0, down.stderr


RUNNING: list[Beefy] = []  # the session's localBeefy once started: ended when its last module is done


@pytest.fixture(scope="session")
def beefy_project(tmp_path_factory, scratch_project) -> Iterator[Beefy]:
    project = copy_project(scratch_project, tmp_path_factory.mktemp("beefy-project"))
    profile = project / f"run/environments/{BEEFY}.yaml"
    keys = {"nodeNetwork": str(unused_subnet(skip=2)), "firstNodeId": BEEFY_FIRST_NODE_ID}
    profile.write_text(yaml.safe_dump({**yaml.safe_load(profile.read_text()), **keys}))
    with (project / "run/broker-configs/default.yaml").open("a") as config:
        config.write(FAST_FENCING)
    beefy = Beefy(project, {"DIMSTER_PROJECT_DIR": str(project)})
    RUNNING.append(beefy)
    try:
        yield beefy
    finally:
        RUNNING.remove(beefy)
        beefy_down(beefy)


@pytest.fixture
def beefy(beefy_project) -> Beefy:
    """localBeefy up (started, or reused as it mostly is) for this test."""
    result = dimster("cluster", "up", BEEFY, env=beefy_project.env)
    assert result.code == 0, result.stderr
    return beefy_project
