"""When an agent counts as silent (coordinator/workers/remote.py): only for the time the coordinator
listened. A run loop busy elsewhere (starting the workers, a long step) sends no probe, and the
agents' quiet then is no silence: CI's run of 5b0d8b7 lost both agents of a run right after its
workers started, the coordinator having been busy 4.7 s with a time-out of 3 s."""

import time

import pytest

from dimster.coordinator.workers.remote import COORDINATOR_TIMEOUT
from dimster.coordinator.workers.seam import WorkerLost
from tests.agents import inproc_agent_link

pytestmark = pytest.mark.unit


def test_an_agent_is_not_silent_while_the_coordinator_was_not_listening(tmp_path):
    """A time-out of 120 s, not 3: a thread of the niced unit tier may wait seconds for a CPU inside the
    receive, which counts as listening."""
    with inproc_agent_link(tmp_path, timeout=120) as (workers, _agent):
        # the loop was away for 200 s since its last receive, and heard the agent last just before
        workers._listened = workers.links[0].last_heard = time.monotonic() - 200
        assert workers.receive(0.2) == [] and not workers.links[0].gone


def test_an_agent_silent_while_the_coordinator_listened_is_lost_and_stopped_only_when_it_ends_alone(tmp_path):
    with inproc_agent_link(tmp_path, timeout=3) as (workers, _agent):
        listening = time.time()  # before any probe of ours
        deadline = time.monotonic() + 120  # a hang guard: the niced tier's threads may wait for a CPU
        lost: list = []
        while not lost and time.monotonic() < deadline:  # receive after receive, as the run loop does
            lost = [m for _, m in workers.receive(0.2) if isinstance(m, WorkerLost)]
        [gone] = lost
        assert "silent for 3s" in gone.reason
        # the agent may not hear us either: it goes on until its own time-out after our last probe
        assert gone.stopped_by >= listening + COORDINATOR_TIMEOUT


def test_a_wall_clock_stepped_an_hour_forward_loses_no_agent(tmp_path, monkeypatch):
    """Silence is measured on the monotonic clock: the wall clock stepped an hour (NTP, a resumed VM)
    mid-run makes no agent silent, and a receive with a deadline still ends at its time."""
    with inproc_agent_link(tmp_path, timeout=120) as (workers, _agent):  # a niced thread may wait seconds
        assert workers.receive(0.2) == []
        stepped = time.time
        monkeypatch.setattr(time, "time", lambda: stepped() + 3600)
        began = time.monotonic()
        assert workers.receive(0.5) == [] and not workers.links[0].gone
        assert time.monotonic() - began < 600  # not the hour the wall clock moved
