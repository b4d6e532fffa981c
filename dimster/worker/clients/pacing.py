"""One thread that paces every producer of a worker process.

A producer's pass (records due since its last pass, handed to its Kafka client) is short, and at high
rates its next record is due within tens of microseconds. Four producers each on a thread of their own
woke 100,000 times a second between them and took turns at the interpreter's lock: pacing alone (no
Kafka) cost 0.9-1 core at 100,000 msg/s, and on a busy host had a tail of 1-2 ms, where one thread
pacing all four cost 0.4 of a core and half the tail or less (docs/benchmarks.md, "Pacing at high
rates"). So a worker's producers join one loop, which runs each member's pass in turn and sleeps until
the earliest next record is due.
A producer's own thread keeps its client's life: it builds the client, joins, waits, leaves and closes.
"""

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from dimster.clients.jvm import detach_thread
from dimster.worker import clock

log = logging.getLogger("dimster.worker")
LONGEST_PAUSE_S = 0.05  # a rate changed live, or a member joined, is taken up within this
Pass = Callable[[], float]  # sends what is due; returns when (epoch s, coordinator's clock) more falls due


@dataclass(eq=False)
class _Member:
    run_pass: Pass
    failed: Callable[[Exception], None]
    left: bool = False  # set before its leave waits: no round starts its pass again
    passing: threading.Lock = field(default_factory=threading.Lock)  # held for its pass


class PacingLoop:
    """Runs its members' passes, one after another, on one thread that lives while it has members. A
    member blocked in its pass (a client whose queue is full) holds the others' passes back, never
    their joins and leaves."""

    def __init__(self, name: str = "pacing"):
        self.name = name
        self._lock = threading.Lock()  # for the members and the thread; never held during a pass
        self._members: dict[object, _Member] = {}
        self._round: tuple[_Member, ...] = ()  # the members, as the loop reads them without the lock
        self._first = 0  # the member whose pass comes first: each round the next, so none is always last
        self._joined = threading.Event()  # cuts the loop's pause short
        self._thread: threading.Thread | None = None

    def join(self, member: object, run_pass: Pass, failed: Callable[[Exception], None]) -> None:
        """From now on `run_pass` runs in every round until `member` leaves, or until it raises: then it
        leaves and `failed` gets the exception (on the loop's thread)."""
        with self._lock:
            self._set_members({**self._members, member: _Member(run_pass, failed)})
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
        self._joined.set()

    def leave(self, member: object) -> None:
        """No pass of `member` runs once this returns (one under way is waited for, no other)."""
        with self._lock:
            members = dict(self._members)
            left = members.pop(member, None)
            self._set_members(members)
        if left is not None:
            left.left = True
            with left.passing:
                pass

    def members(self) -> int:
        return len(self._round)

    def _run(self) -> None:
        try:
            while (next_due := self._pass_all()) is not None:
                pause = next_due - clock.now()
                if pause > 0:
                    self._joined.wait(min(pause, LONGEST_PAUSE_S))
                if self._joined.is_set():  # (a clear takes the event's lock: not on every round)
                    self._joined.clear()
        except BaseException as e:  # the loop's own fault: its members fail with it, never silently
            log.exception("the pacing loop failed")
            self._fail_all(e if isinstance(e, Exception) else RuntimeError(f"the pacing loop ended: {e!r}"))
        finally:
            with self._lock:
                if self._thread is threading.current_thread():
                    self._thread = None
            detach_thread()  # a Java producer's sends attached this thread to the JVM

    def _pass_all(self) -> float | None:
        """Every member's pass; the earliest time one falls due again, or None once no member is left
        (the thread then ends, and the next join starts another)."""
        members = self._round
        if not members:
            with self._lock:
                if not self._members:
                    self._thread = None
                    return None
            return clock.now()
        self._first = first = (self._first + 1) % len(members)
        next_due = float("inf")
        for m in members[first:] + members[:first]:
            if m.left:
                continue
            with m.passing:
                if m.left:  # it left while the pass before it ran
                    continue
                try:
                    next_due = min(next_due, m.run_pass())
                except Exception as e:  # the member's own failure: its thread reports it  # noqa: BLE001
                    self._drop(m)
                    m.failed(e)
        return next_due

    def _set_members(self, members: dict[object, _Member]) -> None:
        """The members, and the round's snapshot of them that the loop reads without the lock (lock held)."""
        self._members, self._round = members, tuple(members.values())

    def _drop(self, failed: _Member) -> None:
        failed.left = True
        with self._lock:
            self._set_members({key: m for key, m in self._members.items() if m is not failed})

    def _fail_all(self, error: Exception) -> None:
        with self._lock:
            members = self._round
            self._set_members({})
        for m in members:
            m.left = True
            with contextlib.suppress(Exception):  # one member's report must not keep it from the others
                m.failed(error)

    def _forget_in_child(self) -> None:
        """A forked child has none of its parent's threads: it starts with no loop running."""
        self._lock, self._thread, self._joined = threading.Lock(), None, threading.Event()
        self._set_members({})


WORKER_PACING = PacingLoop()  # the worker process's one loop, which all its producers join
os.register_at_fork(after_in_child=WORKER_PACING._forget_in_child)
