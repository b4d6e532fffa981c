"""Processes dimster starts (brokers) can be stopped by any dimster process, not only by the one
that started them: the run's coordinator starts a broker, `cluster redeploy` from another terminal
stops it. No broker needed: `sleep` stands in for one."""

import socket
import subprocess
import sys
import time

import psutil
import pytest

from dimster.errors import ClusterError
from dimster.processes import TrackedProcess, spawn
from tests.waiting import until

pytestmark = pytest.mark.unit

# A stand-in for the run's coordinator: starts `sleep` as `how` says, prints its PID, then stays
# alive without ever reaping it.
HOLDER = """
import subprocess, sys, time
from pathlib import Path
from dimster.processes import spawn
if sys.argv[1] == "spawn":
    pid = spawn(["sleep", "120"], Path(sys.argv[2])).pid
else:
    pid = subprocess.Popen(["sleep", "120"], start_new_session=True).pid
print(pid, flush=True)
time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path):
    """Start a holder with `how`; yields the holder and the PID of the `sleep` it started; ends both."""
    started: list[tuple[subprocess.Popen, int]] = []

    def start(how: str) -> tuple[subprocess.Popen, int]:
        process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, how, str(tmp_path / "sleep.log")], stdout=subprocess.PIPE, text=True
        )
        line = process.stdout.readline()
        assert line.strip().isdigit(), "the holder did not start (its error is in the captured stderr)"
        pid = int(line)
        started.append((process, pid))
        return process, pid

    yield start
    for process, pid in started:
        process.kill()
        process.wait()
        try:
            sleeper = psutil.Process(pid)
            if command_line(sleeper, within=10)[:1] == ["sleep"]:  # a teardown waits no longer
                sleeper.kill()
        except psutil.Error:
            pass


def tracked(pid: int) -> TrackedProcess:
    return TrackedProcess.of(pid)


def command_line(process: psutil.Process, within: float = 120.0) -> list[str]:
    """The process's command line once its exec has laid it out. Its starter goes on as soon as the
    exec has replaced the old program's memory; Linux sets the new program's arguments later in the
    same exec (after the ELF loader has mapped the program and its interpreter), and until then
    /proc shows an empty one: on a busy host, for longer than the starter's exit and ours take."""
    line: list[str] = []

    def laid_out() -> bool:
        nonlocal line
        line = process.cmdline()
        return bool(line)

    until(laid_out, within, every=0.01)
    return line


def test_a_zombie_of_another_process_counts_as_stopped(holder):
    _, pid = holder("popen")  # the holder is its parent and never reaps it
    process = tracked(pid)
    begin = time.monotonic()
    process.stop(timeout=60)  # a niced process may wait seconds for a CPU to act on SIGTERM
    assert time.monotonic() - begin < 60  # a hang guard
    assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not process.alive()


def test_a_spawned_process_is_no_child_of_the_process_that_spawned_it(holder):
    starter, pid = holder("spawn")
    sleeper = psutil.Process(pid)
    assert sleeper.ppid() != starter.pid
    assert command_line(sleeper) == ["sleep", "120"]
    process = tracked(pid)
    process.stop(timeout=60)
    assert not process.alive()
    assert starter.poll() is None  # the starter is still there: it did not have to exit or reap


def test_spawn_appends_output_to_the_log_and_passes_the_environment(tmp_path):
    log = tmp_path / "logs" / "out.log"
    log.parent.mkdir()
    log.write_text("before\n")
    process = spawn(["sh", "-c", "echo $DIMSTER_TEST_VALUE"], log, env={"DIMSTER_TEST_VALUE": "hello"})
    assert until(lambda: not process.alive())
    assert log.read_text() == "before\nhello\n"


def test_spawn_of_a_missing_program_is_one_cluster_error(tmp_path):
    with pytest.raises(ClusterError) as error:
        spawn([str(tmp_path / "no-such-java"), "-version"], tmp_path / "out.log")
    message = str(error.value)
    assert message.startswith("could not start no-such-java: ") and "\n" not in message
    assert "No such file or directory" in message


def test_stopping_a_process_that_has_exited_does_nothing():
    child = subprocess.Popen(["sleep", "0.1"])
    process = tracked(child.pid)
    child.wait()
    process.stop(timeout=1)
    assert not process.alive()


def test_a_process_listens_on_its_own_port_not_on_one_another_process_holds(tmp_path):
    """What tells dimster's Spark server from a process that took its port first."""
    listener = "import socket, sys, time\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
    # CPU enough to count: /proc gives it in whole 10-ms ticks, and the interpreter's start-up alone
    # read 0 once (a fresh clone's unit tier beside a CPU hog)
    listener += "while time.process_time() < 0.3: pass\n"
    listener += "print(s.getsockname()[1], flush=True); time.sleep(60)\n"
    child = subprocess.Popen([sys.executable, "-c", listener], stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        process = tracked(child.pid)
        with socket.socket() as other:  # this test's own listener, on a port of its own
            other.bind(("127.0.0.1", 0))
            other.listen()
            assert process.listens_on(port) and not process.listens_on(other.getsockname()[1])
        spent = process.cpu_seconds()
        assert spent is not None and spent >= 0.1  # what the child spent, as the kernel counted it
        process.kill()
        assert not process.listens_on(port) and process.cpu_seconds() is None
    finally:
        child.kill()
        child.wait()


def test_a_step_of_the_hosts_clock_leaves_a_tracked_process_ours(monkeypatch):
    """psutil's wall-clock start of a process is the boot time (/proc/stat, itself derived from the
    clock) plus its start since boot: when the clock is set or slewed it moves. A run's coordinator,
    recorded before the step, must still be alive to the next `dimster status`, or that command
    calls a live run crashed (CI saw it on 2026-11-30) and a redeploy skips a broker it must stop."""
    import psutil._pslinux as linux

    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        recorded = TrackedProcess.of(sleeper.pid)
        impostor = TrackedProcess(sleeper.pid, recorded.started - 0.5)  # an earlier process of that PID
        boot_time = linux.boot_time()
        monkeypatch.setattr(linux, "boot_time", lambda: boot_time + 2.0)
        assert psutil.Process(sleeper.pid).create_time() > recorded.started + 2.0  # the wall-clock start moved
        assert recorded.alive() and not impostor.alive()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not recorded.alive()


def test_a_process_recorded_by_wall_clock_is_still_found():
    """State files of an older dimster (a cluster still running through an upgrade of dimster) hold
    the wall-clock start: those processes are still recognized, and stopped."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        wall_clock = TrackedProcess(sleeper.pid, psutil.Process(sleeper.pid).create_time())
        assert wall_clock.alive() and not TrackedProcess(sleeper.pid, wall_clock.started - 5).alive()
        wall_clock.stop(timeout=10)  # SIGTERM reaches it (the stop reaps it, as its parent here)
        assert not wall_clock.alive() and not psutil.pid_exists(sleeper.pid)
    finally:
        sleeper.kill()
