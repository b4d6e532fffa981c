"""Faults on nodes dimster runs, without a broker: the signals reach only the process dimster
started, and every mistake is one line. (A run through real faults: tests/test_cluster_three_nodes.py.)"""

import queue
import signal
import subprocess
import sys
import time

import psutil
import pytest
import yaml

from dimster.cluster.local import LocalCluster
from dimster.cluster.netns import NodeNetwork
from dimster.coordinator.live.faults import FaultRunner, FaultStep, fault_steps
from dimster.environment import load_environment
from dimster.errors import ClusterError
from dimster.processes import TrackedProcess
from dimster.report.charts import Marker, markers
from dimster.report.data import RunData
from dimster.workload.model import parse_workload
from tests.conftest import dimster, one_error_line, spare_ports_yaml, write_environment
from tests.held_clock import HeldClock
from tests.netns import unused_subnet
from tests.waiting import until

pytestmark = pytest.mark.unit


@pytest.fixture
def sleeper():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def test_pause_resume_and_kill_reach_the_tracked_process(sleeper):
    tracked = TrackedProcess.of(sleeper.pid)
    tracked.send(signal.SIGSTOP)
    assert until(tracked.paused) and tracked.alive()
    tracked.send(signal.SIGCONT)
    assert until(lambda: not tracked.paused())
    tracked.send(signal.SIGKILL)
    sleeper.wait(120)
    assert not tracked.alive()
    with pytest.raises(ClusterError, match=f"process {sleeper.pid} is not running"):
        tracked.send(signal.SIGKILL)


def test_a_process_that_only_shares_the_pid_is_never_signalled(sleeper):
    impostor = TrackedProcess(sleeper.pid, TrackedProcess.of(sleeper.pid).started - 100)  # an earlier one
    with pytest.raises(ClusterError, match="is not running"):
        impostor.send(signal.SIGSTOP)
    assert psutil.Process(sleeper.pid).status() != psutil.STATUS_STOPPED


def test_stopping_a_paused_process_ends_it_with_sigterm(tmp_path):
    marker, ready = tmp_path / "terminated", tmp_path / "ready"
    code = (
        "import signal, sys, time, pathlib\n"
        f"signal.signal(signal.SIGTERM, lambda *_: (pathlib.Path({str(marker)!r}).touch(), sys.exit(0)))\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code])
    try:
        tracked = TrackedProcess.of(process.pid)
        assert until(ready.exists)  # the handler is in place
        tracked.send(signal.SIGSTOP)
        assert until(tracked.paused)
        tracked.stop(timeout=20)  # SIGTERM is acted on once the process runs again, not SIGKILL's
        assert marker.exists() and not tracked.alive()
    finally:
        process.kill()


@pytest.mark.parametrize("action", ["kill", "pause", "resume", "restart", "isolate", "rejoin"])
def test_a_node_that_is_not_there_is_one_line(project, action):
    write_environment(project, "faulty", spare_ports_yaml())
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    one_error_line(dimster("cluster", action, "faulty", "--node", "7", env=env), "'faulty' has nodes 1", "no node 7")
    one_error_line(
        dimster("cluster", action, "faulty", "--node", "1", env=env),
        "'faulty' is not running",
        "dimster cluster up faulty",
    )


def test_faults_on_clusters_dimster_does_not_run_as_processes_are_one_line(project):
    write_environment(project, "ext", "backend: external\nbootstrapServers: 127.0.0.1:1\n")
    write_environment(project, "box", f"backend: docker\n{spare_ports_yaml(backend='docker')}")
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    one_error_line(dimster("cluster", "kill", "ext", "--node", "1", env=env), "external cluster")
    one_error_line(dimster("cluster", "pause", "box", "--node", "1", env=env), "docker pause dimster-box-node-1")


def test_a_fault_is_a_marker_on_the_report_timeline(tmp_path):
    events = [
        {"time": 1000.0, "event": "load_started"},
        {"time": 1012.5, "event": "fault", "action": "kill", "node": 2, "message": "node 2 killed"},
        {"time": 1030.0, "event": "fault", "action": "restart", "node": 2},
    ]
    run = RunData(tmp_path, {"load_started": 1000.0}, {}, {}, {}, {"events": events})
    assert markers(run) == [Marker(12.5, "node 2 kill", "fault"), Marker(30.0, "node 2 restart", "fault")]


# ---- the workload's faults schedule ---------------------------------------------------------------------
class RecordingCluster:
    """Stands for the run's cluster backend: keeps the fault calls the runner makes, in order."""

    def __init__(self):
        self.calls: list[tuple[str, int]] = []

    def fault(self, node_id: int, action: str, progress) -> str:
        self.calls.append((action, node_id))
        return f"node {node_id} {action}"


def events_of(events: queue.Queue) -> list[tuple[str, str, int]]:
    found = []
    while not events.empty():
        kind, details = events.get()
        found.append((kind, details["action"], details["node"]))
    return found


def test_the_schedule_puts_each_heal_after_its_fault():
    workload = parse_workload(
        {
            "name": "f",
            "faults": [
                {"atSeconds": 5, "action": "kill", "node": 2, "durationSeconds": 10},
                {"atSeconds": 8, "action": "pause", "node": 3, "durationSeconds": 4},
                {"atSeconds": 9, "action": "restart", "node": 1},
                {"atSeconds": 10, "action": "isolate", "node": 1, "durationSeconds": 3},
                {"atSeconds": 11, "action": "isolate-all", "node": 2, "durationSeconds": 1},
            ],
        },
        "test",
    )
    assert fault_steps(workload) == [
        FaultStep(5, "kill", 2),
        FaultStep(8, "pause", 3),
        FaultStep(9, "restart", 1),
        FaultStep(10, "isolate", 1),
        FaultStep(11, "isolate-all", 2),
        FaultStep(12, "resume", 3),
        FaultStep(12, "rejoin", 2),
        FaultStep(13, "rejoin", 1),
        FaultStep(15, "start", 2),
    ]


def test_the_runner_heals_at_the_end_what_is_still_broken():
    cluster, events = RecordingCluster(), queue.Queue()
    steps = [FaultStep(0.01, "kill", 2), FaultStep(0.02, "pause", 3), FaultStep(3600, "resume", 3)]
    runner = FaultRunner(cluster, steps, time.time(), events)
    runner.start()
    assert until(lambda: len(cluster.calls) == 2)
    runner.finish()  # the resume an hour later never comes: the end of the load heals both
    runner.thread.join(120)  # a hang guard: a thread of the niced unit tier may wait seconds for a CPU
    assert runner.done() and cluster.calls == [("kill", 2), ("pause", 3), ("start", 2), ("resume", 3)]
    assert events_of(events) == [
        ("fault", "kill", 2),
        ("fault", "pause", 3),
        ("fault", "start", 2),
        ("fault", "resume", 3),
    ]


def test_a_live_schedule_replaces_the_steps_to_come_and_drops_past_ones(monkeypatch):
    """On the runner's clock, held by the test: a step 50 ms to come was once past on a busy host by
    the time the test rescheduled (the runner's thread had waited for a CPU)."""
    from dimster.coordinator.live import faults

    clock = HeldClock(now=1000.0)
    monkeypatch.setattr(faults, "time", clock)
    cluster, events = RecordingCluster(), queue.Queue()
    runner = FaultRunner(cluster, [FaultStep(3600, "restart", 1)], clock.now - 10, events)
    runner.start()
    assert runner.reschedule([FaultStep(5, "restart", 1), FaultStep(10.05, "restart", 2)]) == 1  # 5 s has passed
    assert [(step.at, step.action, step.node) for step in runner.pending] == [(10.05, "restart", 2)]
    time.sleep(0.2)
    assert cluster.calls == []  # not yet its time
    clock.now += 1.0  # the thread, waiting for the hour before, wakes for the new step
    assert until(lambda: cluster.calls == [("restart", 2)])
    runner.finish()
    runner.thread.join(120)
    assert cluster.calls == [("restart", 2)]


def test_a_live_schedule_keeps_the_heals_of_faults_that_happened():
    cluster, events = RecordingCluster(), queue.Queue()
    runner = FaultRunner(cluster, [FaultStep(0.01, "kill", 2), FaultStep(3600, "start", 2)], time.time(), events)
    runner.start()
    assert until(lambda: cluster.calls == [("kill", 2)])
    assert runner.reschedule([FaultStep(3000, "restart", 1)]) == 2  # node 2 still starts again at its time
    assert [(step.action, step.node) for step in runner.pending] == [("restart", 1), ("start", 2)]
    runner.finish()
    runner.thread.join(120)
    assert cluster.calls == [("kill", 2), ("start", 2)]  # healed at the end, the restart never came


class RefusingCluster(RecordingCluster):
    def fault(self, node_id: int, action: str, progress) -> str:
        raise ClusterError(f"node {node_id} of 'x' is not running")


@pytest.mark.parametrize(("first", "started_ago"), [(0.01, 0.0), (0.0, 5.0)])
def test_a_fault_that_cannot_happen_is_an_event_and_the_schedule_goes_on(first, started_ago):
    """Each step that fails is an event, and the next still comes. The load starts before its runner
    is built: a step already due then (a fault at 0 s; or at 10 ms, when a busy host kept the run from
    building the runner sooner, as in a fresh clone's suite) runs at once, never dropped as past (only
    a live change's new schedule drops those)."""
    cluster, events = RefusingCluster(), queue.Queue()
    steps = [FaultStep(first, "pause", 2), FaultStep(first + 0.01, "restart", 1)]
    runner = FaultRunner(cluster, steps, time.time() - started_ago, events)
    runner.start()
    assert until(lambda: events.qsize() == 2)
    runner.finish()
    runner.thread.join(120)
    assert events_of(events) == [("fault_failed", "pause", 2), ("fault_failed", "restart", 1)]


@pytest.mark.parametrize(
    ("faults", "fragment"),
    [
        ([{"atSeconds": 1, "action": "restart", "node": 1, "durationSeconds": 5}], "a restart heals itself"),
        ([{"atSeconds": 1, "action": "explode", "node": 1}], "faults.0.action"),
        ([{"atSeconds": float("inf"), "action": "kill", "node": 1}], "faults.0.atSeconds"),
        ([{"atSeconds": 9, "action": "kill", "node": 1}, {"atSeconds": 1, "action": "pause", "node": 1}], "in order"),
    ],
)
def test_a_bad_faults_schedule_is_one_line(tmp_path, faults, fragment):
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump({"name": "faults", "faults": faults}))
    one_error_line(dimster("validate", str(path)), "faults.yaml", fragment)


def test_faults_the_environment_cannot_have_are_one_line_before_anything_starts(project, tmp_path, state_dir):
    write_environment(project, "faulty", spare_ports_yaml())
    write_environment(
        project, "box", f"backend: docker\ndockerHost: unix:///nowhere.sock\n{spare_ports_yaml(backend='docker')}"
    )
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump({"name": "faults", "faults": [{"atSeconds": 1, "action": "kill", "node": 4}]}))
    one_error_line(
        dimster("run", "faulty", "-w", str(path), env=env), "faults.0.node: 4 is not a node of 'faulty' (nodes 1)"
    )
    one_error_line(
        dimster("run", "box", "-w", str(path), env=env), "faults: for clusters of backend local", "backend docker"
    )
    path.write_text(yaml.safe_dump({"name": "faults", "faults": [{"atSeconds": 1, "action": "isolate", "node": 1}]}))
    one_error_line(
        dimster("run", "faulty", "-w", str(path), env=env),
        "faults.0.action: isolate needs a profile with nodeNetwork",
        "run/environments/faulty.yaml has none",
    )
    assert not (state_dir / "clusters" / "faulty").exists()


@pytest.mark.parametrize(
    ("subnet", "fragment"),
    [
        ("banana", "is not an IPv4 subnet"),
        ("8.8.8.0/24", "must be a private IPv4 subnet"),
        ("10.1.1.0/30", "16 addresses"),
    ],
)
def test_a_bad_node_network_is_one_line(project, subnet, fragment):
    write_environment(project, "walled", f"nodes: 3\nnodeNetwork: {subnet}\n{spare_ports_yaml()}")
    result = dimster("cluster", "status", "walled", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "run/environments/walled.yaml", "nodeNetwork", fragment)


def test_a_node_listens_where_its_namespace_is(project, monkeypatch):
    """The profile (what a node binds to and advertises) and the network (where its namespace's address
    is) name the same address for every node, and the host's bridge address is none of them."""
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))
    write_environment(project, "walled", f"nodes: 3\nfirstNodeId: 4\nnodeNetwork: 10.77.3.0/24\n{spare_ports_yaml()}")
    profile = load_environment("walled")
    network = NodeNetwork(profile.node_network, project, profile.node_ids)
    assert [profile.node_host(i) for i in range(3)] == network.addresses == ["10.77.3.2", "10.77.3.3", "10.77.3.4"]
    assert network.bridge_address == "10.77.3.1"
    assert [profile.node_host(i) for i in range(3)] == [LocalCluster(profile).managed_properties(i)["listeners"]
                                                      .split("://")[1].split(":")[0] for i in range(3)]  # fmt: skip


def routes(namespace: str) -> list[str]:
    shown = subprocess.run(
        ["ip", "-n", namespace, "route", "show", "type", "blackhole"], capture_output=True, text=True
    )
    return sorted(line.split()[1] for line in shown.stdout.splitlines())


def test_isolation_is_blackhole_routes_in_the_namespaces_and_remove_leaves_nothing(tmp_path):
    network = NodeNetwork(str(unused_subnet()), tmp_path, [1, 2, 3])
    a1, a2, a3 = network.addresses
    try:
        network.create()
        network.create()  # again: what exists is kept
        assert [routes(network.namespace(i)) for i in range(3)] == [[], [], []]
        network.apply_isolation({2: "nodes"})
        assert [routes(network.namespace(i)) for i in range(3)] == [[a2], sorted([a1, a3]), [a2]]
        network.apply_isolation({2: "nodes", 3: "all"})
        expected = [sorted([a2, a3]), sorted([a1, a3]), sorted([a1, a2, network.bridge_address])]
        assert [routes(network.namespace(i)) for i in range(3)] == expected
        network.apply_isolation({3: "all"})  # 2 rejoins; 3 stays cut off from it
        assert [routes(network.namespace(i)) for i in range(3)] == [
            [a3],
            [a3],
            sorted([a1, a2, network.bridge_address]),
        ]
    finally:
        network.remove()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(network.namespace(i) in listed for i in range(3))
    assert subprocess.run(["ip", "link", "show", network.bridge], capture_output=True).returncode != 0


def test_a_fault_that_fails_on_a_bug_is_an_event_with_its_traceback_kept(tmp_path):
    """A fault the cluster refuses (DimsterError) is said as it is; one that fails on a bug of dimster's
    (a planted AttributeError) is an event too, never the run's end, and its traceback is in the
    bundle's logs/coordinator-errors.log, where the event's line points."""
    from dimster.errors import DimsterError
    from dimster.results.bundle import ResultsBundle

    class Failing(RecordingCluster):
        def fault(self, node_id: int, action: str, progress) -> str:
            if node_id == 1:
                raise DimsterError("node 1 is not running")
            raise AttributeError("'NoneType' object has no attribute 'pid'")

    bundle = ResultsBundle(tmp_path, "w")
    bundle.start(workload={"name": "w"}, environment={}, broker_config={}, kafka_version="4.4.0", run_id="r")
    events: queue.Queue = queue.Queue()
    steps = [FaultStep(0.01, "kill", 1), FaultStep(0.02, "pause", 2)]
    runner = FaultRunner(Failing(), steps, time.time(), events, internal_error=bundle.internal_error)
    runner.start()
    assert until(lambda: events.qsize() == 2)
    runner.finish()
    runner.thread.join(120)
    messages = []
    while not events.empty():
        kind, details = events.get()
        messages.append((kind, details["message"]))
    assert messages[0] == ("fault_failed", "fault kill of node 1 failed: node 1 is not running")
    bug = "fault pause of node 2 failed: internal error: AttributeError: 'NoneType' object has no attribute 'pid'"
    assert messages[1] == ("fault_failed", bug + " (traceback in logs/coordinator-errors.log)")
    trace = (bundle.path / "logs" / "coordinator-errors.log").read_text()
    assert "fault\nTraceback (most recent call last)" in trace and "in fault\n" in trace
