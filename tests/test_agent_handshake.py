"""Agents refuse what they should, each with one line: a wrong token, another protocol version, a
second run while busy; an unreachable address says so. Real agent processes on loopback, no Kafka."""

import json

import pytest
import zmq

from dimster import __version__
from dimster.coordinator.workers.agent_handshake import WorkersError, handshake
from dimster.worker.protocol import PROTOCOL_VERSION, Close, Hello, encode
from tests.agents import TOKEN, running_agent, status_hello, write_token
from tests.conftest import dimster, spare_ports

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    folder = tmp_path_factory.mktemp("agent")
    address = f"127.0.0.1:{spare_ports(4)['brokerPortBase'] + 7}"
    token_file = write_token(folder)
    with running_agent(address, token_file, folder / "agent.log"):
        yield address, token_file


# The handshakes below wait up to 60 s for the answer they expect: a niced agent may wait seconds for a CPU.


def hello(workload: str = "r1", version: int = PROTOCOL_VERSION) -> Hello:
    return Hello(__version__, version, workload, "test-host")


def test_status_says_up_idle_and_what_it_is(agent):
    address, token_file = agent
    result = dimster("worker", "status", address, "--token-file", str(token_file), "--json")
    assert result.code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["up"] and not answer["busy"] and answer["protocol"] == PROTOCOL_VERSION
    assert answer["dimster"] == __version__ and answer["cores"] >= 1


def test_a_wrong_token_is_one_line(agent, tmp_path):
    address, _ = agent
    wrong = write_token(tmp_path, "another-token-entirely-0000")
    result = dimster("worker", "status", address, "--token-file", str(wrong))
    assert result.code == 3
    assert result.error_lines == [
        f"dimster: error: agent {address} did not accept our worker token (the secure handshake failed)"
    ]


def test_an_unreachable_agent_is_one_line(tmp_path):
    address = f"127.0.0.1:{spare_ports(4)['brokerPortBase'] + 8}"  # nothing listens there
    result = dimster("worker", "status", address, "--token-file", str(write_token(tmp_path)))
    assert result.code == 3
    assert result.error_lines == [
        f"dimster: error: agent {address} is unreachable: nothing accepted a connection within 5s"
    ]


def test_another_protocol_version_is_refused(agent):
    address, _ = agent
    context = zmq.Context()
    try:
        with pytest.raises(
            WorkersError, match=rf"protocol 99 .* does not match this agent's protocol {PROTOCOL_VERSION}"
        ):
            handshake(context, address, TOKEN, hello(version=99), timeout=60)
    finally:
        context.term()


def test_a_busy_agent_refuses_a_second_run_and_says_whose(agent):
    address, token_file = agent
    context = zmq.Context()
    try:
        first, welcome = handshake(context, address, TOKEN, hello("run-a"), timeout=60)
        assert welcome.busy_with == "workload run-a from test-host"
        with pytest.raises(WorkersError, match="refused: busy with workload run-a from test-host"):
            handshake(context, address, TOKEN, hello("run-b"), timeout=60)
        status = dimster("worker", "status", address, "--token-file", str(token_file), "--json")
        assert json.loads(status.stdout)["busyWith"] == "workload run-a from test-host"
        first.send(encode(Close()))  # released unused: the agent is free again
        first.close(linger=1000)
        second = None
        for _ in range(50):
            try:
                second, _ = handshake(context, address, TOKEN, status_hello(), timeout=2)
            except WorkersError:
                continue
            break
        assert second is not None
        second.close()
        status = dimster("worker", "status", address, "--token-file", str(token_file), "--json")
        assert json.loads(status.stdout)["busy"] is False
    finally:
        context.term()
