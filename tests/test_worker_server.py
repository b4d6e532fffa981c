"""A run's worker processes fork from dimster's worker server (worker/process.py): one server process,
a child of the coordinator (or agent), serves every worker, and each worker runs with its starter's
environment and folder as they were when it started, not as they were when the server started."""

import os

import psutil
import pytest

from dimster.worker.process import start_process, start_worker_server, worker_context

pytestmark = pytest.mark.unit


def tell(connection) -> None:
    """What a started process finds: its parent, an environment value, and its folder."""
    connection.send((os.getppid(), os.environ.get("DIMSTER_TEST_STARTER"), os.getcwd()))
    connection.close()


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
