"""A run's worker processes fork from dimster's worker server (worker/process.py): one server process,
a child of the coordinator (or agent), serves every worker, and each worker runs with its starter's
environment and folder as they were when it started, not as they were when the server started."""

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from dimster.worker.process import start_process, start_worker_server, worker_context
from tests.forked import tell
from tests.waiting import until

pytestmark = pytest.mark.unit


def started(name: str) -> tuple[int, str | None, str]:
    ours, theirs = worker_context().Pipe()
    process = start_process(tell, (theirs,), name)
    theirs.close()
    try:
        assert ours.poll(60), "the process did not answer"
        return ours.recv()
    finally:
        process.join(10)


def test_workers_fork_from_one_server_with_their_starters_environment_and_folder(tmp_path, monkeypatch):
    start_worker_server()
    monkeypatch.setenv("DIMSTER_TEST_STARTER", "first")
    first = tmp_path / "first"
    first.mkdir()
    monkeypatch.chdir(first)
    server, value, folder = started("first")
    assert (value, folder) == ("first", str(first))
    assert server != os.getpid() and psutil.Process(server).ppid() == os.getpid()  # the server is our child

    monkeypatch.setenv("DIMSTER_TEST_STARTER", "second")  # after the server started
    monkeypatch.chdir(tmp_path)
    again, value, folder = started("second")
    assert (again, value, folder) == (server, "second", str(tmp_path))  # the same server, today's environment


STARTER = """
import multiprocessing.util, os, sys, time
from tests.forked import idle
from dimster.worker.process import start_process
process = start_process(idle, (), "idle")
while not os.path.exists(sys.argv[1]):  # the worker writes its PIDs once it runs
    time.sleep(0.05)
print(open(sys.argv[1]).read(), multiprocessing.util.get_temp_dir(), flush=True)
time.sleep(120)
"""


def test_a_killed_starter_takes_its_worker_server_and_workers_at_once(tmp_path):
    """kill -9 of the coordinator (or agent): its worker server and the workers forked from it end with
    it, also a worker that is not reading its pipe (which a forked worker's server alone would not),
    and no folder of theirs is left in the temporary folder."""
    told = tmp_path / "pids"
    root = Path(__file__).parent.parent
    env = {**os.environ, "DIMSTER_TEST_TOLD": str(told)}
    command = [sys.executable, "-c", STARTER, str(told)]
    starter = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        server_pid, worker_pid, folder = starter.stdout.readline().split()
        server, worker = psutil.Process(int(server_pid)), psutil.Process(int(worker_pid))
        assert server.ppid() == starter.pid and worker.ppid() == server.pid
        assert any(Path(folder).glob("listener-*"))  # the server's socket
    finally:
        starter.kill()
        starter.wait(60)

    def running() -> list[int]:
        return [p.pid for p in (server, worker) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    # a hang guard: their ends may wait seconds for a CPU on a busy host
    assert until(lambda: not running(), every=0.1), f"still running after their starter was killed: {running()}"
    assert not Path(folder).exists()  # the server took its socket's folder with it


PLANTED = """
from pathlib import Path
Path(__file__).with_name("planted-module-ran").write_text("it ran")
"""


def test_the_worker_server_imports_nothing_from_its_starters_folder(tmp_path):
    """A module planted in the folder a coordinator or agent was started from (`cd /tmp && dimster
    worker serve`) is not imported by the worker server, which imports typer (dimster.cli.app) where its
    starter had not: Python would put that folder first on a `python -c` server's module path."""
    (tmp_path / "typer.py").write_text(PLANTED)
    told = tmp_path / "told"
    starter = "from tests.forked import note\nfrom dimster.worker.process import start_process\n"
    starter += "process = start_process(note, (), 'note')\nprocess.join(60)\n"
    env = {**os.environ, "DIMSTER_TEST_TOLD": str(told), "PYTHONPATH": str(Path(__file__).parent.parent)}
    done = subprocess.run([sys.executable, "-c", starter], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert told.read_text() == "the worker ran"
    assert not (tmp_path / "planted-module-ran").exists()
