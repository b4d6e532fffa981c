"""The worker's one pacing thread (dimster/worker/clients/pacing.py), with members of our own: every
member's pass runs in turn, a member that left or failed runs no more, a failure reaches its own member
only, a pass under way holds a leave back, and the thread lives only while the loop has members."""

import threading
import time

import pytest

from dimster.worker import clock
from dimster.worker.clients.pacing import PacingLoop

pytestmark = pytest.mark.unit


class Member:
    """Counts its passes; each says its next record is due in `every` seconds."""

    def __init__(self, every: float = 0.001):
        self.every, self.passes, self.failures = every, 0, []

    def run_pass(self) -> float:
        self.passes += 1
        return clock.now() + self.every

    def failed(self, e: Exception) -> None:
        self.failures.append(e)


def until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within 10 s"
        time.sleep(0.005)


def loop_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_every_members_pass_runs_and_one_that_left_runs_no_more():
    loop, a, b = PacingLoop("pacing-test-1"), Member(), Member()
    loop.join(a, a.run_pass, a.failed)
    loop.join(b, b.run_pass, b.failed)
    until(lambda: a.passes >= 5 and b.passes >= 5)
    loop.leave(a)
    left_at = a.passes
    until(lambda: b.passes >= left_at + 20)  # many rounds after the leave
    assert a.passes == left_at and loop.members() == 1
    loop.leave(b)


def test_a_failing_pass_is_its_own_members_failure_and_the_others_go_on():
    loop, good, bad = PacingLoop("pacing-test-2"), Member(), Member()
    boom = RuntimeError("queue full")

    def failing_pass() -> float:
        bad.passes += 1
        raise boom

    loop.join(good, good.run_pass, good.failed)
    loop.join(bad, failing_pass, bad.failed)
    until(lambda: bad.failures)
    passes_of_good = good.passes
    until(lambda: good.passes >= passes_of_good + 20)
    assert bad.failures == [boom] and bad.passes == 1 and good.failures == []
    assert loop.members() == 1
    loop.leave(good)


def test_a_leave_waits_for_the_members_pass_under_way():
    loop, member = PacingLoop("pacing-test-3"), Member()
    in_pass, release = threading.Event(), threading.Event()

    def slow_pass() -> float:
        in_pass.set()
        release.wait(10)
        return clock.now() + 0.001

    loop.join(member, slow_pass, member.failed)
    assert in_pass.wait(10)
    leaving = threading.Thread(target=loop.leave, args=(member,))
    leaving.start()
    leaving.join(0.2)
    assert leaving.is_alive()  # the pass holds it back
    release.set()
    leaving.join(10)
    assert not leaving.is_alive() and loop.members() == 0


def test_the_thread_lives_only_while_the_loop_has_members():
    loop, first, second = PacingLoop("pacing-test-4"), Member(), Member()
    loop.join(first, first.run_pass, first.failed)
    until(lambda: first.passes >= 3)
    assert len(loop_threads("pacing-test-4")) == 1
    loop.leave(first)
    until(lambda: not loop_threads("pacing-test-4"))  # it ends at its next round
    loop.join(second, second.run_pass, second.failed)  # and a join starts another
    until(lambda: second.passes >= 3)
    assert len(loop_threads("pacing-test-4")) == 1
    loop.leave(second)
