"""`dimster cluster upgrade` without a broker: what it refuses (one line, before any node is touched),
the feature flags it finalizes with (never kraft.version: KAFKA-21426), the profile it rewrites, a
half-upgraded cluster's state, and its steps on the report's timeline. (A real rolling upgrade under
load: tests/test_upgrade_live.py.)"""

import json
import subprocess
import sys
from io import StringIO

import pytest
from rich.console import Console

from dimster.cli.output import cluster_table
from dimster.cluster.backend import ClusterStatus, NodeStatus
from dimster.cluster.local import LocalCluster
from dimster.cluster.upgrade import described_levels, finalize_flags, properties_text, record_profile_version
from dimster.environment import load_environment
from dimster.errors import ClusterError
from dimster.processes import TrackedProcess
from dimster.report.charts import Marker, markers
from dimster.report.data import RunData
from tests.conftest import SUITE_JVM, dimster, one_error_line, spare_ports_yaml, write_environment

pytestmark = pytest.mark.unit

MAPPING_4_4 = {  # `kafka-features version-mapping --release-version 4.4` of Kafka 4.4.0
    "metadata.version": 33,
    "kraft.version": 1,
    "transaction.version": 2,
    "group.version": 1,
    "eligible.leader.replicas.version": 1,
    "share.version": 2,
    "streams.version": 1,
}


@pytest.fixture
def sleepers():
    """Three processes that stand for a cluster's nodes in its state file (nothing signals them)."""
    processes = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(3)]
    yield processes
    for process in processes:
        process.kill()
        process.wait()


def write_state(project, env: str, processes, versions: list[str | None], cluster_version: str) -> None:
    """A state file for `env` whose nodes are `processes`, each recorded as running its version."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DIMSTER_PROJECT_DIR", str(project))
        cluster_dir = load_environment(env).cluster_dir
    nodes = [
        {"node_id": i + 1, "pid": p.pid, "started": TrackedProcess.of(p.pid).started, "kafka_version": v}
        for i, (p, v) in enumerate(zip(processes, versions, strict=True))
    ]
    cluster_dir.mkdir(parents=True, exist_ok=True)
    state = {"kafka_version": cluster_version, "nodes": nodes, "broker_config": {}}
    (cluster_dir / "state.json").write_text(json.dumps(state))


def test_what_cannot_be_upgraded_is_one_line(project):
    write_environment(project, "ext", "backend: external\nbootstrapServers: 127.0.0.1:1\n")
    write_environment(project, "box", f"backend: docker\n{spare_ports_yaml(backend='docker')}")
    write_environment(project, "idle", f"nodes: 3\nkafkaVersion: 4.3.1\n{spare_ports_yaml()}")
    env = {"DIMSTER_PROJECT_DIR": str(project)}

    def refused(name: str, to: str, *fragments: str) -> None:
        one_error_line(dimster("cluster", "upgrade", name, "--to", to, env=env), *fragments)

    refused("ext", "4.4.0", "'ext' is an external cluster", "only clusters it runs")
    refused("box", "4.4.0", "'box' is a docker cluster", "`local` clusters only")
    refused("idle", "4.4", "--to '4.4' is not a Kafka version such as 4.4.0")
    refused("idle", "4.1.1", "--to 4.1.1", "Kafka 4.2.0 or newer")
    refused("idle", "4.4.0", "'idle' is not running", "dimster cluster up idle")


def test_a_downgrade_is_refused_before_any_node_is_touched(project, sleepers):
    write_environment(project, "newer", f"nodes: 3\n{spare_ports_yaml()}")
    write_state(project, "newer", sleepers, ["4.4.0", "4.4.0", "4.3.1"], "4.3.1")
    result = dimster("cluster", "upgrade", "newer", "--to", "4.3.1", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "'newer' runs Kafka 4.4.0", "--to 4.3.1 would be a downgrade")
    assert all(p.poll() is None for p in sleepers)


def test_a_half_upgraded_cluster_shows_each_nodes_version_and_refuses_a_redeploy(project, sleepers, monkeypatch):
    write_environment(project, "mixed", f"nodes: 3\nkafkaVersion: 4.3.1\n{spare_ports_yaml()}")
    write_state(project, "mixed", sleepers, ["4.4.0", None, "4.3.1"], "4.3.1")  # None: a record from before
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))
    cluster = LocalCluster(load_environment("mixed"))
    state = cluster.recorded_state()
    assert state is not None and [state.node_version(i) for i in range(3)] == ["4.4.0", "4.3.1", "4.3.1"]
    with pytest.raises(ClusterError, match=r"half-way through an upgrade \(Kafka 4.3.1, 4.4.0\).*--to VERSION"):
        cluster.running_config(print)

    nodes = [NodeStatus(n, 100 + n, True, True, 0, 0, "", kafka_version=v) for n, v in ((1, "4.4.0"), (2, "4.3.1"))]
    out = StringIO()
    status = ClusterStatus("mixed", "local", "4.3.1", "b:1", True, True, nodes)
    Console(file=out, width=200).print(cluster_table(status))
    assert "Kafka 4.3.1 (mixed: 4.3.1, 4.4.0)" in out.getvalue()
    assert [line.split("│")[2].strip() for line in out.getvalue().splitlines() if line.startswith("│ ")] == [
        "4.4.0",
        "4.3.1",
    ]


def test_finalizing_names_every_feature_below_its_release_level_but_never_kraft_version():
    current = {  # a 4.3.1 cluster formatted by dimster, with a feature someone raised by hand
        "metadata.version": 30,
        "kraft.version": 0,
        "transaction.version": 2,
        "group.version": 1,
        "eligible.leader.replicas.version": 3,
        "share.version": 1,
    }
    assert finalize_flags(current, MAPPING_4_4) == {"metadata.version": 33, "share.version": 2, "streams.version": 1}
    finalized = {**current, **MAPPING_4_4, "kraft.version": 0, "eligible.leader.replicas.version": 3}
    assert finalize_flags(finalized, MAPPING_4_4) == {}


def test_the_levels_are_read_from_what_kafka_features_describe_prints():
    text = (  # Kafka 4.4.0's, of a cluster formatted by 4.3.1
        "Feature: eligible.leader.replicas.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
        "FinalizedVersionLevel: 1\tEpoch: 39\n"
        "Feature: metadata.version          SupportedMinVersion: 3.3-IV3          SupportedMaxVersion: 4.4-IV2"
        "          FinalizedVersionLevel: 4.3-IV0          Epoch: 39\n"
        "Feature: share.version  SupportedMinVersion: 0  SupportedMaxVersion: 2  FinalizedVersionLevel: 1  Epoch: 39\n"
    )
    assert described_levels(text) == {
        "eligible.leader.replicas.version": "1",
        "metadata.version": "4.3-IV0",
        "share.version": "1",
    }


def test_a_secure_clusters_client_properties_reach_the_feature_tool_as_java_reads_them():
    text = properties_text({"a": "x\\y", "pem": "-----BEGIN\nAB\r\n-----END", "p": "pässwörd😀"})
    assert text == "a=x\\\\y\npem=-----BEGIN\\nAB\\r\\n-----END\np=p\\u00e4ssw\\u00f6rd\\ud83d\\ude00\n"
    assert text.isascii()


def test_the_profile_names_the_version_its_cluster_now_runs(project, monkeypatch):
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))
    write_environment(project, "kept", "# three nodes\nnodes: 3\nkafkaVersion: '4.3.1'  # the old one\nheap: 1g\n")
    record_profile_version("kept", "4.4.0")
    path = project / "run" / "environments" / "kept.yaml"
    assert path.read_text() == f"# three nodes\nnodes: 3\nkafkaVersion: 4.4.0  # the old one\nheap: 1g\n{SUITE_JVM}"
    write_environment(project, "unnamed", "nodes: 3")
    record_profile_version("unnamed", "4.4.0")
    assert load_environment("unnamed").kafka_version == "4.4.0"


def test_the_upgrade_steps_are_markers_on_the_report_timeline(tmp_path):
    events = [
        {"time": 1000.0, "event": "load_started"},
        {"time": 1002.0, "event": "upgrade_started", "message": "upgrade to Kafka 4.4.0 started (nodes 1 on 4.3.1)"},
        {"time": 1003.0, "event": "upgrade_node_stopped", "node": 1, "message": "node 1 stopped (Kafka 4.3.1, pid 7)"},
        {"time": 1004.0, "event": "upgrade_node_started", "node": 1, "message": "node 1 on Kafka 4.4.0 (pid 8)"},
        {"time": 1009.0, "event": "upgrade_features_finalized", "message": "features finalized (share.version=2)"},
        {"time": 1010.0, "event": "upgrade_failed", "message": "upgrade to Kafka 4.4.0 failed: no answer"},
    ]
    run = RunData(tmp_path, {"load_started": 1000.0}, {}, {}, {}, {"events": events})
    assert markers(run) == [
        Marker(2.0, "upgrade to Kafka 4.4.0 started", "upgrade"),
        Marker(3.0, "node 1 stopped", "upgrade"),
        Marker(4.0, "node 1 on Kafka 4.4.0", "upgrade"),
        Marker(9.0, "features finalized", "upgrade"),
        Marker(10.0, "upgrade to Kafka 4.4.0 failed", "upgrade"),
    ]
