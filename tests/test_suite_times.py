"""scripts/suite_times.py: the suite's last lines name each tier's slowest tests and their share, and
the tests that used the most CPU; tests/times.py measures the CPU of a test's processes."""

import json
import subprocess
import sys
import time

import psutil
import pytest

from tests.cli import REPO
from tests.times import BETWEEN, CpuTimes

sys.path.insert(0, str(REPO / "scripts"))
import suite_times

pytestmark = pytest.mark.unit


def test_the_ten_slowest_come_first_with_their_share_of_the_tiers_test_time_and_cpu(tmp_path, capsys):
    seconds = {f"tests/test_{i}.py::t": float(i) for i in range(1, 13)}  # 78 s in all
    cpu = {f"tests/test_{i}.py::t": 13.0 - i for i in range(1, 13)} | {BETWEEN: 22.0}  # 100 s
    (tmp_path / "kafka.json").write_text(json.dumps({"seconds": seconds, "cpu": cpu}))
    suite_times.main(str(tmp_path), "unit", "kafka")  # a tier that wrote nothing is left out
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "== slowest of tier kafka: 12 tests, 78 s of test time (on all its workers), 100 s of CPU"
    assert lines[1].split() == ["12.0", "s", "15.4%", "1.0", "CPU", "tests/test_12.py::t"]
    assert lines[10].split()[-1] == "tests/test_3.py::t"
    assert lines[11] == "== most CPU of tier kafka: 100 s of CPU in all"
    assert lines[12].split()[:5] == ["22.0", "s", "22.0%", "of", "CPU,"] and lines[12].endswith(BETWEEN)
    assert lines[13].split()[-1] == "tests/test_1.py::t" and len(lines) == 22


def test_the_cpu_of_a_process_the_test_left_running_is_the_tests():
    """Two children that outlive their parents (as a broker or a detached run outlives the CLI call
    that started it), each burning 0.6 s of CPU: no pytest process reaps them. While its parent lives,
    neither counts (the parent's reaping will); once orphaned, the one that carries the session's
    environment is charged to the test running, with all its CPU so far, and the other is not."""
    marker = ("DIMSTER_TIMES_PROBE", str(time.monotonic_ns()))
    burn = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass"
    quiet = "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL"  # else the caller waits for it to end
    orphaning = (  # starts the burner, then ends when told (its stdin closed)
        f"import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', {burn!r}], {quiet}).pid, "
        "flush=True); sys.stdin.read()"
    )
    times = CpuTimes((marker,))
    times.sample_once()  # what runs already is counted from here
    times.begin("the test")
    parents = [
        subprocess.Popen([sys.executable, "-c", orphaning], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for env in ({marker[0]: marker[1]}, {})
    ]
    pids = [int(parent.stdout.readline()) for parent in parents]
    times.sample_once()
    # their parents live: only the parents' own start-up is charged (they are this process's children)
    assert times.seconds.get("the test", 0.0) < 0.3, times.seconds
    for parent in parents:
        parent.communicate()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(running(pid) for pid in pids):
        times.sample_once()
        time.sleep(0.05)
    assert not any(running(pid) for pid in pids)
    # sampled (this process's own CPU is added only by end()): the marked orphan's 0.6 s but what it
    # used after the last sample before it ended, and none of the other's
    assert 0.4 <= times.seconds["the test"] < 0.9, times.seconds


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_process_unreadable_at_one_sample_is_not_charged_its_whole_cpu_again(monkeypatch):
    """A process whose line of parents cannot be read at one sample (psutil's ZombieProcess when a
    parent ends as it is asked) is charged at the next sample for what it used since the last one read
    it, not once more for all its CPU so far (a broker of an hour charged to the test that happened to
    run then)."""
    marker = ("DIMSTER_TIMES_PROBE", str(time.monotonic_ns()))
    burn = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\ntime.sleep(60)"
    orphaning = (
        f"import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', {burn!r}], "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid, flush=True)"
    )
    times = CpuTimes((marker,))
    times.sample_once()
    times.begin("the test")
    parent = subprocess.run(
        [sys.executable, "-c", orphaning], env={marker[0]: marker[1]}, capture_output=True, text=True, check=True
    )
    burner = psutil.Process(int(parent.stdout))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(burner.cpu_times()[:2]) < 0.6:
            time.sleep(0.05)
        times.sample_once()
        assert 0.5 <= times.seconds["the test"] < 0.9, times.seconds

        def unreadable(process, me):
            raise psutil.ZombieProcess(process.pid)

        with monkeypatch.context() as patch:
            patch.setattr(times, "_reaped_by_pytest", unreadable)
            times.sample_once()
        times.sample_once()
        assert 0.5 <= times.seconds["the test"] < 0.9, times.seconds  # 1.2 and more when charged again
    finally:
        burner.kill()


def test_a_child_of_the_test_process_is_charged_to_the_tests_it_ran_in_not_whole_to_the_one_that_reaps_it():
    """A process the test process itself started and reaps later (a Spark server a summary started
    there, ended by a later test): its CPU is charged to the test it burned it in as it runs, and the
    test that reaps it is not charged it again from getrusage."""
    marker = ("DIMSTER_TIMES_PROBE", str(time.monotonic_ns()))
    burn = "import sys, time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\nsys.stdin.read()"
    times = CpuTimes((marker,))
    times.sample_once()
    times.begin("the first test")
    child = subprocess.Popen([sys.executable, "-c", burn], env={marker[0]: marker[1]}, stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(psutil.Process(child.pid).cpu_times()[:2]) < 0.6:
            time.sleep(0.05)
        times.sample_once()
        first = times.end()
        times.begin("the second test")
    finally:
        child.communicate()  # ends, reaped by this process in the second test
    second = times.end()
    assert 0.6 <= first < 1.0, times.seconds  # this process's own CPU meanwhile added
    assert second < 0.3, times.seconds  # 0.6 and more when getrusage's figure of the child counts again
