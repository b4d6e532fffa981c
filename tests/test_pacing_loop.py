"""The worker's one pacing thread (dimster/worker/clients/pacing.py), with members of our own: every
member's pass runs in turn, a member that left or failed runs no more, a failure reaches its own member
only, a pass under way holds its own member's leave back and no other's, a fault of the loop itself
fails every member, and the thread lives only while the loop has members."""

import threading
import time

import pytest

from dimster.worker import clock
from dimster.worker.clients.pacing import PacingLoop
from tests.waiting import until

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


def loop_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_every_members_pass_runs_and_one_that_left_runs_no_more():
    loop, a, b = PacingLoop("pacing-test-1"), Member(), Member()
    loop.join(a, a.run_pass, a.failed)
    loop.join(b, b.run_pass, b.failed)
    assert until(lambda: a.passes >= 5 and b.passes >= 5)
    loop.leave(a)
    passes_of_a, passes_of_b = a.passes, b.passes
    assert until(lambda: b.passes >= passes_of_b + 20)  # many rounds after the leave
    assert a.passes == passes_of_a and loop.members() == 1
    loop.leave(b)


def test_a_failing_pass_is_its_own_members_failure_and_the_others_go_on():
    loop, good, bad = PacingLoop("pacing-test-2"), Member(), Member()
    boom = RuntimeError("queue full")

    def failing_pass() -> float:
        bad.passes += 1
        raise boom

    loop.join(good, good.run_pass, good.failed)
    loop.join(bad, failing_pass, bad.failed)
    assert until(lambda: bad.failures)
    passes_of_good = good.passes
    assert until(lambda: good.passes >= passes_of_good + 20)
    assert bad.failures == [boom] and bad.passes == 1 and good.failures == []
    assert loop.members() == 1
    loop.leave(good)


def test_a_leave_waits_for_its_members_pass_under_way_and_for_no_other():
    loop, blocked, other = PacingLoop("pacing-test-3"), Member(), Member()
    in_pass, release, finished = threading.Event(), threading.Event(), threading.Event()
    when_left: list[bool] = []

    def slow_pass() -> float:  # as a send to a client whose queue is full
        in_pass.set()
        release.wait(120)
        finished.set()
        return clock.now() + 0.001

    loop.join(other, other.run_pass, other.failed)
    loop.join(blocked, slow_pass, blocked.failed)
    assert in_pass.wait(120)
    loop.leave(other)  # returns at once: the blocked pass is not its member's
    assert not finished.is_set()
    leaving = threading.Thread(target=lambda: (loop.leave(blocked), when_left.append(finished.is_set())))
    leaving.start()
    time.sleep(0.2)
    release.set()
    leaving.join(120)
    assert when_left == [True]  # it returned only once the pass under way had ended
    assert loop.members() == 0


def test_a_fault_of_the_loop_itself_fails_every_member():
    loop, first, second = PacingLoop("pacing-test-5"), Member(), Member()

    def failing_pass() -> float:
        raise RuntimeError("queue full")

    def failed_badly(e: Exception) -> None:  # a report that raises: the loop's thread ends
        raise ValueError("report lost")

    loop.join(second, second.run_pass, second.failed)
    loop.join(first, failing_pass, failed_badly)
    assert until(lambda: second.failures)
    assert [type(e) for e in second.failures] == [ValueError] and loop.members() == 0
    assert until(lambda: not loop_threads("pacing-test-5"))


def test_the_thread_lives_only_while_the_loop_has_members():
    loop, first, second = PacingLoop("pacing-test-4"), Member(), Member()
    loop.join(first, first.run_pass, first.failed)
    assert until(lambda: first.passes >= 3)
    assert len(loop_threads("pacing-test-4")) == 1
    loop.leave(first)
    assert until(lambda: not loop_threads("pacing-test-4"))  # it ends at its next round
    loop.join(second, second.run_pass, second.failed)  # and a join starts another
    assert until(lambda: second.passes >= 3)
    assert len(loop_threads("pacing-test-4")) == 1
    loop.leave(second)
