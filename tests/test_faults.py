"""Faults on nodes dimster runs, without a broker: the signals reach only the process dimster
started, and every mistake is one line. (A run through real faults: tests/test_cluster_three_nodes.py.)"""

import signal
import subprocess
import sys
import time

import psutil
import pytest

from dimster.cluster.processes import TrackedProcess
from dimster.errors import ClusterError
from dimster.report.charts import Marker, markers
from dimster.report.data import RunData
from tests.conftest import dimster, spare_ports_yaml, write_environment
from tests.test_bad_input_more import one_error_line

pytestmark = pytest.mark.unit


@pytest.fixture
def sleeper():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_pause_resume_and_kill_reach_the_tracked_process(sleeper):
    tracked = TrackedProcess(sleeper.pid, psutil.Process(sleeper.pid).create_time())
    tracked.send(signal.SIGSTOP)
    assert until(tracked.paused) and tracked.alive()
    tracked.send(signal.SIGCONT)
    assert until(lambda: not tracked.paused())
    tracked.send(signal.SIGKILL)
    sleeper.wait(10)
    assert not tracked.alive()
    with pytest.raises(ClusterError, match=f"process {sleeper.pid} is not running"):
        tracked.send(signal.SIGKILL)


def test_a_process_that_only_shares_the_pid_is_never_signalled(sleeper):
    impostor = TrackedProcess(sleeper.pid, psutil.Process(sleeper.pid).create_time() - 100)  # an earlier one
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
        tracked = TrackedProcess(process.pid, psutil.Process(process.pid).create_time())
        assert until(ready.exists)  # the handler is in place
        tracked.send(signal.SIGSTOP)
        assert until(tracked.paused)
        tracked.stop(timeout=20)  # SIGTERM is acted on once the process runs again, not SIGKILL's
        assert marker.exists() and not tracked.alive()
    finally:
        process.kill()


@pytest.mark.parametrize("action", ["kill", "pause", "resume", "restart"])
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
