"""How the coordinator takes its agents' messages in (coordinator/workers/remote.py): a bounded number a
pass, in turn from each agent, so that its loop's own work runs between passes however many reports
wait. The agents' far ends are the test's own inproc ZeroMQ sockets."""

import os
import queue
import threading
import time

import pytest
import zmq

from dimster import __version__
from dimster import clock as clock_module
from dimster.coordinator.workers import remote
from dimster.coordinator.workers.remote import MOST_A_PASS, AgentLink, RemoteWorkers
from dimster.coordinator.workers.seam import WorkerLost
from dimster.worker.protocol import (
    PROTOCOL_VERSION,
    REPORTED,
    ClockProbed,
    ProducersStopped,
    Reported,
    Welcome,
    encode,
    worker_frame,
    worker_report,
)
from dimster.worker.report_merge import merged as merged_report
from tests.held_clock import HeldClock
from tests.waiting import until

pytestmark = pytest.mark.unit


def agents(tmp_path, count: int):
    """RemoteWorkers with `count` links (agent i runs worker i), and the links' far ends."""
    workers = RemoteWorkers([f"agent-{i}:1" for i in range(count)], "token", log_dir=tmp_path, timeout=60)
    far_ends = []
    for index in range(count):
        near, far = workers.context.socket(zmq.PAIR), workers.context.socket(zmq.PAIR)
        near.bind(f"inproc://agent-{index}")
        far.connect(f"inproc://agent-{index}")
        welcome = Welcome(__version__, PROTOCOL_VERSION, f"host-{index}", 2, 1 << 30)
        link = AgentLink(index, f"agent-{index}:1", near, welcome, last_heard=time.monotonic(), workers=[index])
        workers.links.append(link)
        workers.owner.append(link)
        far_ends.append(far)
    return workers, far_ends


@pytest.fixture
def agent_links(tmp_path):
    """agent_links(count): RemoteWorkers with `count` links and their far ends, all closed after."""
    made = []

    def make(count: int):
        made.append(agents(tmp_path, count))
        return made[-1]

    yield make
    for workers, far_ends in made:
        for far in far_ends:
            far.close(linger=0)
        workers.close()


def send_reports(far, index: int, count: int) -> None:
    for second in range(count):
        far.send_multipart([worker_frame(index), encode(Reported(worker_report(index, float(second), [])))])


def reports(received) -> list[tuple[int, float]]:
    return [(index, m.report.end_time) for index, m in received if isinstance(m, Reported)]


def test_a_pass_takes_at_most_its_share_in_turn_from_each_agent_and_leaves_the_rest_waiting(agent_links):
    workers, agents = agent_links(2)
    sent = {0: MOST_A_PASS + MOST_A_PASS // 2, 1: MOST_A_PASS // 2 + 2}  # two passes' worth and 2
    for index, far in enumerate(agents):
        send_reports(far, index, sent[index])
    passes = []
    while len(passes) < 10 and sum(map(len, passes)) < sum(sent.values()):
        passes.append(reports(workers.receive(1.0)))
    assert [len(p) for p in passes] == [MOST_A_PASS, MOST_A_PASS, 2]
    assert [index for index, _ in passes[0][:6]] == [0, 1, 0, 1, 0, 1]  # one from each agent in turn
    taken = [item for p in passes for item in p]
    for index in (0, 1):  # every report once, each agent's in the order it sent them
        assert [end for i, end in taken if i == index] == [float(s) for s in range(sent[index])]


def test_each_pass_starts_after_the_agent_served_last_and_every_waiting_agent_counts_as_heard(agent_links, monkeypatch):
    """With more agents than a pass takes, none waits behind the others pass after pass; an agent
    whose turn did not come is not taken for silent."""
    monkeypatch.setattr("dimster.coordinator.workers.remote.MOST_A_PASS", 2)
    workers, agents = agent_links(3)
    for index, far in enumerate(agents):
        send_reports(far, index, 4)
    for link in workers.links:
        link.last_heard = 0.0
    served = [[index for index, _ in reports(workers.receive(1.0))] for _ in range(6)]
    assert served == [[0, 1], [2, 0], [1, 2], [0, 1], [2, 0], [1, 2]]
    assert all(link.last_heard > 0 for link in workers.links) and not any(link.gone for link in workers.links)


def test_a_clock_answer_that_waited_behind_a_full_pass_is_no_sample(agent_links, monkeypatch):
    """A ClockProbed taken while the last pass left messages waiting may have queued behind them: its
    round trip says nothing of the clocks. Once nothing waits, answers are samples again."""
    monkeypatch.setattr("dimster.coordinator.workers.remote.MOST_A_PASS", 2)
    workers, agents = agent_links(2)
    send_reports(agents[0], 0, 3)
    now = time.time()
    agents[0].send_multipart([worker_frame(0), encode(ClockProbed(now, now))])
    clock = workers.links[0].clock
    workers.receive(1.0)  # two reports; two messages left
    assert workers.behind and clock.count == 0
    workers.receive(1.0)  # the third report and the answer, which waited: no sample
    assert not workers.behind and clock.count == 0
    agents[0].send_multipart([worker_frame(0), encode(ClockProbed(now, now))])
    workers.receive(1.0)
    assert clock.count == 1


def test_an_agents_merged_report_counts_its_workers_lines_toward_a_pass(agent_links):
    """An agent's report of 16 workers is 16 reports' work for the loop: a pass takes MOST_A_PASS / 16
    of them, not MOST_A_PASS, so that console lines still come out between passes."""
    workers, (far,) = agent_links(1)
    workers.links[0].workers = list(range(16))  # the 16 workers it runs
    per_pass = MOST_A_PASS // 16
    count = 2 * per_pass + 2
    for second in range(count):
        merged = merged_report([worker_report(w, float(second), []) for w in range(16)])
        far.send(encode(Reported(merged)))  # the agent's own frame: no worker named
    passes = []
    while len(passes) < 10 and sum(map(len, passes)) < count:
        passes.append(reports(workers.receive(1.0)))
    assert [len(p) for p in passes] == [per_pass, per_pass, 2]
    assert [end for p in passes for _, end in p] == [float(s) for s in range(count)]


def test_what_comes_within_the_gathering_after_a_message_is_taken_in_the_same_pass(agent_links, monkeypatch):
    """A pass that has taken a message waits GATHER_SECONDS for more (a report of a single worker each
    at moments spread over the second: each pass's own cost paid for many); what comes later waits
    for the next pass, and a control request's doorbell ends the gathering at once. The passes'
    deadlines are on a clock the test holds: a thread of the niced unit tier may wait for a CPU longer
    than any gathering (a margin of 0.5 s once stood for it)."""
    held = HeldClock(now=1000.0)
    monkeypatch.setattr(clock_module, "time", held)
    workers, agents = agent_links(2)
    taken: list[int] = []  # how many messages each turn of a pass took
    take_turns = workers._take_turns

    def counted(ready, room):
        took, lines = take_turns(ready, room)
        taken.append(len(took))
        return took, lines

    monkeypatch.setattr(workers, "_take_turns", counted)
    passes: queue.Queue = queue.Queue()
    threads: list[threading.Thread] = []

    def receive(doorbell: int | None = None) -> None:
        """A pass (its own deadline 10 s, on the held clock) on a thread of its own, its reports to `passes`."""
        threads.append(threading.Thread(target=lambda: passes.put(reports(workers.receive(10.0, doorbell)))))
        threads[-1].start()

    bell = os.eventfd(0, os.EFD_NONBLOCK)
    try:
        send_reports_from(agents[0], 0, 0)
        receive()
        assert until(lambda: sum(taken) == 1)  # the pass took it and gathers
        send_reports_from(agents[1], 1, 0)
        assert until(lambda: sum(taken) == 2)
        held.now += remote.GATHER_SECONDS  # the gathering is over, the pass's 10 s are not
        assert passes.get(timeout=120) == [(0, 0.0), (1, 0.0)]  # the second came while gathering
        send_reports_from(agents[0], 0, 1)
        receive()
        assert until(lambda: sum(taken) == 3)
        held.now += remote.GATHER_SECONDS
        assert passes.get(timeout=120) == [(0, 1.0)]  # after it: the next pass's
        send_reports_from(agents[1], 1, 1)
        os.eventfd_write(bell, 1)
        receive(bell)
        assert passes.get(timeout=120) == [(1, 1.0)]  # the clock held: the request is not kept waiting
    finally:
        held.now += 3600  # ends any pass still gathering
        for thread in threads:
            thread.join(120)
        os.close(bell)


def send_reports_from(far, index: int, second: int) -> None:
    far.send_multipart([worker_frame(index), encode(Reported(worker_report(index, float(second), [])))])


def test_a_pass_decodes_its_reports_at_its_end_each_in_its_place(agent_links, monkeypatch):
    """Reports are decoded together once the pass has read its messages (warm caches), and come out
    where they came among the others: in turn from each agent, each agent's in the order it sent."""
    workers, agents = agent_links(3)
    waiting_at_decode: list[bool] = []
    real_decode = remote.decode

    def watched(data: bytes):
        if data.startswith(REPORTED):
            waiting_at_decode.append(any(link.socket.poll(0) for link in workers.links))
        return real_decode(data)

    monkeypatch.setattr(remote, "decode", watched)
    send_reports_from(agents[0], 0, 0)
    agents[1].send_multipart([worker_frame(1), encode(ProducersStopped())])
    send_reports_from(agents[2], 2, 0)
    agents[1].send_multipart([worker_frame(1), encode(ProducersStopped())])
    received = workers.receive(1.0)
    kinds = [(index, type(m).__name__, getattr(getattr(m, "report", None), "end_time", None)) for index, m in received]
    assert kinds == [
        (0, "Reported", 0.0),
        (1, "ProducersStopped", None),
        (2, "Reported", 0.0),
        (1, "ProducersStopped", None),
    ]
    assert waiting_at_decode == [False, False]  # each decoded once every message of the pass was read
    assert [m.received[:1] for _, m in received if isinstance(m, Reported)] == [REPORTED[:1]] * 2  # as it came


def test_a_report_that_does_not_decode_loses_its_agent_at_its_place_and_nothing_it_sent_after(agent_links):
    """A report is decoded late, yet what it means comes where it came: its agent lost there, and its
    agent's later messages of the pass dropped, as if it had been read no further."""
    workers, agents = agent_links(2)
    agents[0].send_multipart([worker_frame(0), REPORTED + b"\xc1 not a report"])
    agents[0].send_multipart([worker_frame(0), encode(ProducersStopped())])
    send_reports_from(agents[1], 1, 0)
    agents[0].send_multipart([worker_frame(0), REPORTED + b"\xc1"])  # alone at the pass's end: the same
    received = workers.receive(1.0)
    assert [(index, type(m).__name__) for index, m in received] == [(0, "WorkerLost"), (1, "Reported")]
    [(_, lost)] = [(i, m) for i, m in received if isinstance(m, WorkerLost)]
    assert "cannot read" in lost.reason and workers.links[0].gone and not workers.links[1].gone

    workers, agents = agent_links(2)
    send_reports_from(agents[1], 1, 0)
    agents[0].send_multipart([worker_frame(0), REPORTED + b"\xc1"])
    assert [(index, type(m).__name__) for index, m in workers.receive(1.0)] == [(0, "WorkerLost"), (1, "Reported")]
