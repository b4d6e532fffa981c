"""Each test's wall seconds (set-up, call and tear-down) and CPU seconds, written as JSON to the file
DIMSTER_TEST_TIMES names (scripts/test.sh sets it for each tier; scripts/suite_times.py reads it). With
pytest-xdist every worker's reports reach the controlling process, which writes the file. On a
busy host a test's wall time says as much about its neighbours as about the test; its CPU time says
what it costs the suite, and the suite's CPU over the host's cores is the least its wall time can be.

Counted for a test: the CPU of its pytest process and of the children that process reaped (CLI calls,
runs in the foreground, with whatever those reaped in turn), from getrusage; and the CPU that the
session's processes no pytest process will reap (brokers, detached runs and their workers, the helper
and Spark servers) used while the test ran, sampled every SAMPLE_SECONDS from /proc. Those are told by
their environment, inherited from the session (DIMSTER_TEST_TIMES, and the xdist worker's name).
What they use between two tests is counted under BETWEEN. Not counted: containers (their processes
have an environment of their own), and what a process leaving the session used in its last sample."""

import json
import os
import resource
import threading
from pathlib import Path

import psutil
import pytest

SAMPLE_SECONDS = 2.0
BETWEEN = "(between tests: fixtures' clusters idle, their start and end)"


def _own_cpu() -> float:
    """This process's CPU and that of the children it reaped."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


class CpuTimes:
    """Samples the session's unreaped processes and charges their CPU to the test running."""

    def __init__(self, markers: tuple[tuple[str, str], ...]):
        self.markers = markers  # environment entries every process of this session carries
        self.current = BETWEEN
        self.seconds: dict[str, float] = {}
        self.started_at = 0.0  # _own_cpu() when the current test began
        self._last: dict[tuple[int, float], float] = {}  # (pid, its start) -> its CPU at the last sample
        self._marked: dict[tuple[int, float], bool] = {}  # whether a process carries the markers
        # this process's own children (a Spark server or helper a summary started in the test process,
        # a run started with Popen): sampled as they run, and their CPU at the last sample, which the
        # test that reaps one must not count again from getrusage (_reaped: this test's so far)
        self._children: dict[tuple[int, float], float] = {}
        self._reaped = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, name="cpu-times", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def begin(self, nodeid: str) -> None:
        with self._lock:
            self.current, self.started_at, self._reaped = nodeid, _own_cpu(), 0.0

    def end(self) -> float:
        """The test's CPU seconds so far, its own process's added; what follows is between tests."""
        with self._lock:
            test = self.current
            for key, cpu in list(self._children.items()):
                if not psutil.pid_exists(key[0]):  # reaped since the last sample: getrusage has it whole now
                    self._reaped += cpu
                    del self._children[key]
            self._charge(test, _own_cpu() - self.started_at - self._reaped)
            self.current = BETWEEN
            return self.seconds[test]

    def _charge(self, test: str, seconds: float) -> None:
        self.seconds[test] = self.seconds.get(test, 0.0) + seconds

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self.sample_once()

    def sample_once(self) -> None:
        """Charge the test running with what the session's unreaped processes used since the last
        sample. Under the lock throughout: a child that end() finds reaped must not come back from a
        sample taken before."""
        with self._lock:
            used, children = self._sample()
            self._charge(self.current, used)
            if self.current != BETWEEN:  # between tests getrusage's figure is no one's
                self._reaped += sum(cpu for key, cpu in self._children.items() if key not in children)
            self._children = children

    def _sample(self) -> tuple[float, dict[tuple[int, float], float]]:
        """CPU seconds the session's unreaped processes used since the last sample, and this
        process's children with their CPU now. Whether a process is reaped by a pytest process is
        asked at each sample: one started by a CLI call the test runs (a broker, a detached run) is
        that call's child until the call ends, and counts from then with all its CPU so far (no pytest
        process will reap it, so getrusage never sees it). This process's own children are sampled
        too: one that runs for many tests (a Spark server) is charged to each as it runs, not whole to
        the one that happens to reap it."""
        me, used, now, seen, children = os.getpid(), 0.0, {}, set(), {}
        for process in psutil.process_iter(["create_time", "ppid"]):
            key = (process.pid, process.info["create_time"])
            seen.add(key)
            child = process.info["ppid"] == me
            try:
                if not self._is_marked(process, key) or (not child and self._reaped_by_pytest(process, me)):
                    continue
                times = process.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                # unreadable this once (a parent of its line ending as it was asked): what it uses
                # meanwhile is charged at the next sample that reads it, not all its CPU once more
                if key in self._last:
                    now[key] = self._last[key]
                    if child:
                        children[key] = self._last[key]
                continue
            now[key] = times.user + times.system
            used += now[key] - self._last.get(key, 0.0)
            if child:
                children[key] = now[key]
        self._last = now
        self._marked = {key: marked for key, marked in self._marked.items() if key in seen}
        return used, children

    def _reaped_by_pytest(self, process: psutil.Process, me: int) -> bool:
        """Whether the process's line of parents reaches one of this session's pytest processes (this
        one, or with xdist its controller) before it reaches one outside the session."""
        if process.pid == me:
            return True
        for parent in process.parents():
            if parent.pid == me:
                return True
            if not self._is_marked(parent, (parent.pid, parent.create_time())):
                return False
            if "pytest" in " ".join(parent.cmdline()):
                return True
        return False

    def _is_marked(self, process: psutil.Process, key: tuple[int, float]) -> bool:
        """Whether the process carries the session's markers (its environment, read once)."""
        if key not in self._marked:
            try:
                environment = process.environ()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                return False
            self._marked[key] = all(environment.get(name) == value for name, value in self.markers)
        return self._marked[key]


CPU_TIMES: CpuTimes | None = None


def start(config: pytest.Config) -> None:
    """In each process that runs tests (not pytest-xdist's controller), when DIMSTER_TEST_TIMES asks
    for the times."""
    global CPU_TIMES
    path = os.environ.get("DIMSTER_TEST_TIMES")
    controller = not hasattr(config, "workerinput") and bool(config.getoption("numprocesses", None))
    if not path or controller or CPU_TIMES is not None:
        return
    markers = [("DIMSTER_TEST_TIMES", path)]
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        markers.append(("PYTEST_XDIST_WORKER", worker))
    CPU_TIMES = CpuTimes(tuple(markers))
    CPU_TIMES.start()


TEST_SECONDS: dict[str, float] = {}  # test id -> its set-up, call and tear-down time, in this session
TEST_CPU: dict[str, float] = {}  # test id (or BETWEEN) -> its CPU seconds


def pytest_configure(config):
    start(config)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if CPU_TIMES is not None:
        CPU_TIMES.begin(item.nodeid)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "teardown" and CPU_TIMES is not None:
        outcome.get_result().user_properties.append(("cpu_seconds", CPU_TIMES.end()))


def pytest_runtest_logreport(report):
    TEST_SECONDS[report.nodeid] = TEST_SECONDS.get(report.nodeid, 0.0) + report.duration
    for name, value in report.user_properties:
        if name == "cpu_seconds":
            TEST_CPU[report.nodeid] = value


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """A pytest-xdist worker's CPU between its tests, as it ended."""
    between = getattr(node, "workeroutput", {}).get("cpu_between", 0.0)
    TEST_CPU[BETWEEN] = TEST_CPU.get(BETWEEN, 0.0) + between


def pytest_sessionfinish(session):
    if CPU_TIMES is not None:
        CPU_TIMES.stop()
        between = CPU_TIMES.seconds.get(BETWEEN, 0.0)
        if hasattr(session.config, "workeroutput"):
            session.config.workeroutput["cpu_between"] = between
        else:
            TEST_CPU[BETWEEN] = TEST_CPU.get(BETWEEN, 0.0) + between
    path = os.environ.get("DIMSTER_TEST_TIMES")
    if path and not hasattr(session.config, "workerinput"):  # the controlling process, not a worker
        Path(path).write_text(json.dumps({"seconds": TEST_SECONDS, "cpu": TEST_CPU}))
