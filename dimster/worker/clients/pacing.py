"""One thread that paces every producer of a worker process.

A producer's pass (records due since its last pass, handed to its Kafka client) is short, and at high
rates its next record is due within tens of microseconds. Four producers each on a thread of their own
woke 100,000 times a second between them and took turns at the interpreter's lock: pacing alone (no
Kafka) cost a core and had a tail of 1-3 ms at 100,000 msg/s, where one thread pacing all four cost half
a core and kept a p99 of 0.3 ms (docs/benchmarks.md, "Pacing at high rates"). So a worker's producers
join one loop, which runs each member's pass in turn and sleeps until the earliest next record is due.
A producer's own thread keeps its client's life: it builds the client, joins, waits, leaves and closes.
"""

import threading
from collections.abc import Callable

from dimster.clients.jvm import detach_thread
from dimster.worker import clock

LONGEST_PAUSE_S = 0.05  # a rate changed live, or a member joined, is taken up within this
Pass = Callable[[], float]  # sends what is due; returns when (epoch s, coordinator's clock) more falls due


class PacingLoop:
    """Runs its members' passes, one after another, on one thread that lives while it has members."""

    def __init__(self, name: str = "pacing"):
        self.name = name
        self._members: dict[object, tuple[Pass, Callable[[Exception], None]]] = {}
        self._lock = threading.Lock()  # held for a whole round of passes: leave() waits for it
        self._joined = threading.Event()  # cuts the loop's pause short
        self._thread: threading.Thread | None = None

    def join(self, member: object, run_pass: Pass, failed: Callable[[Exception], None]) -> None:
        """From now on `run_pass` runs in every round until `member` leaves, or until it raises: then it
        leaves and `failed` gets the exception (on the loop's thread)."""
        with self._lock:
            self._members[member] = (run_pass, failed)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
        self._joined.set()

    def leave(self, member: object) -> None:
        """No pass of `member` runs once this returns (one under way is waited for)."""
        with self._lock:
            self._members.pop(member, None)

    def members(self) -> int:
        with self._lock:
            return len(self._members)

    def _run(self) -> None:
        try:
            while (next_due := self._round()) is not None:
                pause = next_due - clock.now()
                if pause > 0:
                    self._joined.wait(min(pause, LONGEST_PAUSE_S))
                if self._joined.is_set():  # (a clear takes the event's lock: not on every round)
                    self._joined.clear()
        finally:
            detach_thread()  # a Java producer's sends attached this thread to the JVM

    def _round(self) -> float | None:
        """Every member's pass; the earliest time one falls due again, or None once no member is left
        (the thread then ends, and the next join starts another)."""
        with self._lock:
            if not self._members:
                self._thread = None
                return None
            next_due = float("inf")
            for member, (run_pass, failed) in list(self._members.items()):
                try:
                    next_due = min(next_due, run_pass())
                except Exception as e:  # the member's own failure: its thread reports it  # noqa: BLE001
                    del self._members[member]
                    failed(e)
            return next_due


WORKER_PACING = PacingLoop()  # the worker process's one loop, which all its producers join
