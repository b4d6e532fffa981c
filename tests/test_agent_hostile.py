"""An agent that one message cannot kill: a token holder sends it a corpus of malformed, out-of-order
and oversized messages of every type; after each, the agent still answers `worker status`. A real
agent process on loopback, no Kafka."""

import dataclasses
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import psutil
import pytest
import zmq

from dimster import __version__
from dimster.coordinator.workers.agent_handshake import WorkersError, handshake
from dimster.remote.agent import MAX_MESSAGE_BYTES
from dimster.worker.protocol import (
    MESSAGES,
    PROTOCOL_VERSION,
    Assign,
    Close,
    Closed,
    Failed,
    Hello,
    LogFileSent,
    ProbeClock,
    Ready,
    Refused,
    StartLoad,
    decode,
    encode,
)
from tests.agents import TOKEN, answer, assignment, claim, idle, release, running_agent, status_hello, write_token
from tests.conftest import dimster, spare_ports
from tests.waiting import until

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile-agent")
    address = f"127.0.0.1:{spare_ports(4)['brokerPortBase'] + 9}"
    token_file = write_token(folder)
    with running_agent(address, token_file, folder / "agent.log"):
        yield address, token_file, folder


def corpus() -> list[tuple[str, list[bytes]]]:
    """(what, frames): for every message type, a body that is not a map, one without its fields, one
    with every field of the wrong type; then bytes that are no message at all, and messages that
    decode but come out of order or carry a path where a version goes."""
    items = []
    for kind, cls in MESSAGES.items():
        fields = [f.name for f in dataclasses.fields(cls)]
        items.append((f"{kind}: not a map", [msgpack.packb([kind, "body"])]))
        if fields:
            items.append((f"{kind}: no fields", [msgpack.packb([kind, {}])]))
            items.append((f"{kind}: wrong types", [msgpack.packb([kind, {key: {"x": [1]} for key in fields}])]))
    rng = random.Random(34)
    items += [
        ("random bytes", [bytes(rng.randrange(256) for _ in range(200))]),
        ("truncated", [encode(ProbeClock(1.0))[:-3]]),
        ("empty", [b""]),
        ("an unknown kind", [msgpack.packb(["Shutdown", {}])]),
        ("not a list", [msgpack.packb({"kind": "Close"})]),
        ("two parts", [encode(Close()), encode(Close())]),
        ("three parts", [b"0", b"0", encode(Close())]),
        ("a worker it does not run", [b"7", encode(StartLoad(1.0))]),
        ("StartLoad before Assign", [encode(StartLoad(1.0))]),
        ("a path for a version", [encode(Assign(assignment("../../../tmp/x")))]),
        ("a Maven argument for a version", [encode(Assign(assignment("4.3.1 -Dexec=evil")))]),
        ("a worker index that names no log file", [encode(Assign(assignment(index=-1)))]),
        ("a workload that is not one", [encode(Assign(assignment(workload={"name": "../../x"})))]),
        ("oversized", [b"\x00" * (MAX_MESSAGE_BYTES + 1)]),
    ]
    return items


# what no dimster coordinator sends, answered: Refused, or Failed by the worker's side
REFUSED = ("random bytes", "truncated", "empty", "an unknown kind", "not a list", "Assign: wrong types")
FAILED = (
    "two parts",
    "three parts",
    "a worker it does not run",
    "StartLoad before Assign",
    "a path for a version",
    "a Maven argument for a version",
    "a worker index that names no log file",
    "a workload that is not one",
)


def test_no_message_of_the_corpus_stops_the_agent_serving(agent):
    address, token_file, _ = agent
    context = zmq.Context()
    answers: dict[str, str] = {}
    try:
        for what, frames in corpus():
            owner, _ = handshake(context, address, TOKEN, Hello(__version__, PROTOCOL_VERSION, "hostile", "h"), 60)
            owner.send_multipart(frames)
            # an answer that must come may wait for the agent's CPU on a busy host; another, if any, 2 s
            if owner.poll(60_000 if what in REFUSED + FAILED else 2000):
                answer = decode(owner.recv_multipart()[-1])
                answers[what] = type(answer).__name__
                if isinstance(answer, (Failed, Refused)):
                    assert "Traceback" not in answer.reason and answer.reason, what
            status, welcome = handshake(context, address, TOKEN, status_hello(), timeout=60)  # still serving
            status.close()
            assert welcome.protocol_version == PROTOCOL_VERSION, what
            if what == "oversized":  # the last: its connection is gone, and the run with it
                owner.close(linger=0)
                break
            owner.send(encode(Close()))  # release the run, if it still holds one
            owner.close(linger=500)
            assert until(lambda: idle(address)), what  # the agent is free again for the next item
    finally:
        context.term()
    # what no dimster coordinator sends is answered, not ignored
    for what in REFUSED:
        assert answers.get(what) == "Refused", (what, answers.get(what))
    for what in FAILED:
        assert answers.get(what) == "Failed", (what, answers.get(what))
    assert "oversized" not in answers  # its connection was dropped, unread
    status = dimster("worker", "status", address, "--token-file", str(token_file), "--json")
    assert status.code == 0 and json.loads(status.stdout)["up"]


def test_a_workload_name_that_is_a_path_is_refused(tmp_path):
    address = f"127.0.0.1:{spare_ports(4)['brokerPortBase'] + 10}"
    with running_agent(address, write_token(tmp_path), tmp_path / "agent.log"):
        context = zmq.Context()
        try:
            with pytest.raises(WorkersError, match=r"'\.\./\.\./escaped' is not a workload's name"):
                handshake(context, address, TOKEN, Hello(__version__, PROTOCOL_VERSION, "../../escaped", "h"), 60)
        finally:
            context.term()


def test_only_regular_files_named_as_logs_are_shipped_back(tmp_path):
    """Whatever lands in a run's folder on the agent, the agent ships back regular files named NAME.log
    only: not a symlink to a file elsewhere on its host, not a file by another name."""
    address = f"127.0.0.1:{spare_ports(4)['brokerPortBase'] + 13}"
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the coordinator")
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    with running_agent(address, write_token(tmp_path), tmp_path / "agent.log", work_dir=work_dir):
        context = zmq.Context()
        try:
            owner = claim(context, address, "ship")
            owner.send(encode(Assign(assignment())))
            assert isinstance(answer(owner), Ready)
            (folder,) = work_dir.glob("dimster-agent-ship-*/worker-0")  # worker 0's own folder
            (folder / "planted.log").symlink_to(secret)
            (folder / "a name with spaces.log").write_text("odd")
            shipped = release(context, address, owner, closes=True)
        finally:
            context.term()
    assert [m.name for m in shipped if isinstance(m, LogFileSent)] == ["worker-0.log"]
    assert isinstance(shipped[-1], Closed)
    assert "is not shipped" in (tmp_path / "agent.log").read_text()


COORDINATOR = """
import sys, time
import zmq
from dimster.worker.protocol import Assign, Ready, encode
from tests.agents import answer, claim
from tests.agents import assignment
context = zmq.Context()
owner = claim(context, sys.argv[1], "orphaned")
owner.send(encode(Assign(assignment())))
assert isinstance(answer(owner), Ready)
print("ready", flush=True)
time.sleep(300)
"""


def test_a_killed_coordinator_s_worker_on_an_agent_ends_within_seconds(tmp_path):
    """kill -9 of the coordinator that holds an agent's run: its kernel closes the connection, and the
    agent ends the run and its worker process at once, not after the 30 s of silence."""
    address = f"127.0.0.1:{spare_ports(4)['brokerPortBase'] + 14}"
    with running_agent(address, write_token(tmp_path), tmp_path / "agent.log") as agent_process:
        root = Path(__file__).parent.parent
        coordinator = subprocess.Popen(
            [sys.executable, "-c", COORDINATOR, address], cwd=root, stdout=subprocess.PIPE, text=True
        )
        try:
            assert coordinator.stdout and coordinator.stdout.readline().strip() == "ready"
            # the worker forks from the agent's worker server (worker/process.py, worker_context)
            children = psutil.Process(agent_process.pid).children()
            (server,) = [child for child in children if "forkserver" in " ".join(child.cmdline())]
            (worker,) = server.children()
            coordinator.kill()
            coordinator.wait(60)
            killed_at = time.monotonic()
            # psutil.TimeoutExpired fails the test; 25 s, not 5: a niced process may wait seconds for a
            # CPU, and the 30 s of silence (its log line, below) would come later
            worker.wait(25)
            ended_after = time.monotonic() - killed_at
        finally:
            if coordinator.poll() is None:
                coordinator.kill()
                coordinator.wait(60)
        context = zmq.Context()
        try:
            probe, welcome = handshake(context, address, TOKEN, status_hello(), timeout=60)
            probe.close()
        finally:
            context.term()
    assert not welcome.busy_with
    assert ended_after < 25
    assert "the coordinator's connection closed" in (tmp_path / "agent.log").read_text()


def test_a_message_that_meets_a_bug_is_refused_and_its_traceback_logged(caplog):
    """The agent's error boundary answers every message; a refusal it means (a ProtocolError) is logged
    as its line, a bug of its own (a planted KeyError) with the traceback, so that it can be found."""
    from dimster.remote import agent as agent_module
    from dimster.worker.protocol import ProtocolError

    agent = agent_module.Agent.__new__(agent_module.Agent)  # the boundary alone: no socket, no work
    agent.session, sent = None, []
    agent._send = lambda peer, message: sent.append(message)  # type: ignore[method-assign]
    for planted in (ProtocolError("a message of 3 parts"), KeyError("run_id")):

        def serve(*_args, error=planted):
            raise error

        agent._from_coordinator = serve  # type: ignore[method-assign]
        with caplog.at_level("WARNING", logger=agent_module.log.name):
            caplog.clear()
            agent._guarded([b"peer", b"{}"], 0)
        [record] = caplog.records
        assert bool(record.exc_info) == isinstance(planted, KeyError), record.getMessage()
    assert [type(m).__name__ for m in sent] == ["Refused", "Refused"]
    assert sent[1].reason == "KeyError: 'run_id'"
