"""LocalWorkers tells a worker that closed and exited from one that died: a Closed still in the pipe
when the process is already gone is read before the process is judged."""

import multiprocessing
import time

import pytest

from dimster.coordinator.workers.local import LocalWorkers
from dimster.coordinator.workers.seam import WorkerLost
from dimster.worker.process import PipeChannel
from dimster.worker.protocol import Closed, Ready

pytestmark = pytest.mark.unit


def say_and_exit(connection, messages):
    channel = PipeChannel(connection)
    for message in messages:
        channel.send(message)


def workers_with(messages, tmp_path) -> LocalWorkers:
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=say_and_exit, args=(theirs, messages))
    process.start()
    process.join(30)  # gone before the coordinator reads anything
    assert not process.is_alive()
    workers = LocalWorkers(tmp_path)
    workers.processes, workers.channels = [process], [PipeChannel(ours)]
    return workers


def receive_all(workers: LocalWorkers) -> list:
    """Everything until the worker is gone (checking liveness first, as a busy loop may)."""
    received = []
    deadline = time.monotonic() + 10
    while 0 not in workers.gone and time.monotonic() < deadline:
        received += [m for _, m in workers.receive(0.0)]
    return received


def test_a_worker_that_closed_and_exited_is_not_lost(tmp_path):
    assert receive_all(workers_with([Ready(), Closed()], tmp_path)) == [Ready(), Closed()]


def test_a_worker_that_exited_without_closing_is_lost(tmp_path):
    received = receive_all(workers_with([Ready()], tmp_path))
    assert (
        received[0] == Ready() and isinstance(received[-1], WorkerLost) and "exited with code 0" in received[-1].reason
    )
