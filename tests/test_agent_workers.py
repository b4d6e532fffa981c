"""An agent that runs several workers for one run (`dimster worker serve --workers N`): it says how many
in its Welcome, starts one process per Assign up to that many, gives a message after a worker's index to
that worker alone and one without to each, answers each worker's messages after its index, ships each
worker's own logs when it closes, and is free once the last has. A real agent process on loopback, real
worker processes; no Kafka (workers with no clients)."""

import json

import pytest
import zmq

from dimster.worker.protocol import (
    Assign,
    Assignment,
    Close,
    Closed,
    Failed,
    LogFileSent,
    Ready,
    Reported,
    decode,
    encode,
)
from dimster.workload.model import Workload
from tests.agents import claim, idle, running_agent, write_token
from tests.conftest import dimster, spare_ports

pytestmark = pytest.mark.unit

SLOTS = 3


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    folder = tmp_path_factory.mktemp("agent-of-workers")
    address = f"127.0.0.1:{spare_ports(4)['brokerPortBase'] + 15}"
    token_file = write_token(folder)
    with running_agent(address, token_file, folder / "agent.log", options=("--workers", str(SLOTS))):
        yield address, token_file


def assignment(index: int) -> Assignment:
    work = Workload.model_validate({"name": "w"}).model_dump(by_alias=True)
    return Assignment(index, "127.0.0.1:9", work, [], [], 1, 5, "", "4.3.1")


def frames_until(socket: zmq.Socket, done, timeout_ms: int = 30_000) -> list[tuple[bytes | None, object]]:
    """(worker frame or None, message) as the agent sends them, until `done(those so far)` holds."""
    got: list[tuple[bytes | None, object]] = []
    while not done(got) and socket.poll(timeout_ms):
        frames = socket.recv_multipart()
        got.append((frames[0] if len(frames) == 2 else None, decode(frames[-1])))
    return got


def test_the_agent_says_how_many_workers_it_runs(agent):
    address, token_file = agent
    status = dimster("worker", "status", address, "--token-file", str(token_file), "--json")
    assert status.code == 0 and json.loads(status.stdout)["workers"] == SLOTS


def test_each_worker_of_a_run_is_its_own_process_addressed_by_its_index(agent):
    address, _ = agent
    context = zmq.Context()
    owner = claim(context, address, "several")
    try:
        for index in (4, 7, 9):
            owner.send(encode(Assign(assignment(index))))
        # the workers ready first report before load: the agent's merged reports (frame None) may come between
        ready = frames_until(owner, lambda got: sum(isinstance(m, Ready) for _, m in got) == 3)
        said = [(frame, type(m)) for frame, m in ready if not isinstance(m, Reported)]
        assert sorted(said, key=repr) == [(b"4", Ready), (b"7", Ready), (b"9", Ready)]
        owner.send(encode(Assign(assignment(11))))  # one more than its slots
        got = frames_until(owner, lambda got: any(not isinstance(m, Reported) for _, m in got))
        [(frame, refused)] = [(frame, m) for frame, m in got if not isinstance(m, Reported)]
        assert frame is None and isinstance(refused, Failed) and f"this agent's {SLOTS} (--workers)" in refused.reason
        owner.send_multipart([b"7", encode(Close())])  # worker 7 alone
        closing = frames_until(owner, lambda got: any(isinstance(m, Closed) for _, m in got))
        said = [
            (f, m.name if isinstance(m, LogFileSent) else type(m)) for f, m in closing if not isinstance(m, Reported)
        ]
        assert said == [
            (b"7", "worker-7.log"),
            (b"7", Closed),
        ]
        assert not idle(address)  # 4 and 9 run on
        owner.send(encode(Close()))  # every worker of the run
        rest = frames_until(owner, lambda got: sum(isinstance(m, Closed) for _, m in got) == 2)
        shipped = sorted((f, m.name) for f, m in rest if isinstance(m, LogFileSent))
        assert shipped == [(b"4", "worker-4.log"), (b"9", "worker-9.log")]
        assert sorted(f for f, m in rest if isinstance(m, Closed)) == [b"4", b"9"]
    finally:
        owner.close(linger=500)
        context.term()
    for _ in range(50):
        if idle(address):
            break
    assert idle(address)
