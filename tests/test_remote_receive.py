"""How the coordinator takes its agents' messages in (coordinator/workers/remote.py): a bounded number a
pass, in turn from each agent, so that its loop's own work runs between passes however many reports
wait. The agents' far ends are the test's own inproc ZeroMQ sockets."""

import time

import pytest
import zmq

from dimster import __version__
from dimster.coordinator.workers.remote import MOST_A_PASS, AgentLink, RemoteWorkers
from dimster.worker.protocol import PROTOCOL_VERSION, IntervalReport, Reported, Welcome, encode, worker_frame

pytestmark = pytest.mark.unit


@pytest.fixture
def two_agents(tmp_path):
    """RemoteWorkers with two links (workers 0 and 1), whose far ends the test holds."""
    workers = RemoteWorkers(["agent-a:1", "agent-b:1"], "token", log_dir=tmp_path, timeout=60)
    far_ends = []
    for index in (0, 1):
        near, far = workers.context.socket(zmq.PAIR), workers.context.socket(zmq.PAIR)
        near.bind(f"inproc://agent-{index}")
        far.connect(f"inproc://agent-{index}")
        welcome = Welcome(__version__, PROTOCOL_VERSION, f"host-{index}", 2, 1 << 30)
        link = AgentLink(index, f"agent-{index}:1", near, welcome, last_heard=time.time(), workers=[index])
        workers.links.append(link)
        workers.owner.append(link)
        far_ends.append(far)
    yield workers, far_ends
    for far in far_ends:
        far.close(linger=0)
    workers.close()


def test_a_pass_takes_at_most_its_share_in_turn_from_each_agent_and_leaves_the_rest_waiting(two_agents):
    workers, agents = two_agents
    sent = {0: 100, 1: 30}
    for index, far in enumerate(agents):
        for second in range(sent[index]):
            far.send_multipart([worker_frame(index), encode(Reported(IntervalReport(index, float(second), [])))])
    passes = []
    while len(passes) < 10 and sum(map(len, passes)) < sum(sent.values()):
        passes.append([(index, m.report.end_time) for index, m in workers.receive(1.0) if isinstance(m, Reported)])
    assert [len(p) for p in passes] == [MOST_A_PASS, MOST_A_PASS, 2]  # 130 in all
    assert [index for index, _ in passes[0][:6]] == [0, 1, 0, 1, 0, 1]  # one from each agent in turn
    taken = [item for p in passes for item in p]
    for index in (0, 1):  # every report once, each agent's in the order it sent them
        assert [end for i, end in taken if i == index] == [float(s) for s in range(sent[index])]
