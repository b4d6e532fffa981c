"""The run's one voice: events into events.jsonl and lines onto the console (and console.log), secrets
masked in both. Helper threads (faults, redeploys, broker scrapes) hand their events over through
`background`; only the run loop's thread writes them."""

import queue
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dimster.results.bundle import ResultsBundle


class RunLog:
    def __init__(self, bundle: ResultsBundle, say: Callable[[str], None] = print):
        self.bundle = bundle
        self._say = say
        self.background: queue.Queue[tuple[str, dict]] = queue.Queue()  # (event, details) from helper threads

    def say(self, line: str) -> None:
        """Print a line and keep it in console.log, secrets masked in both."""
        self._say(self.bundle.console(line))

    def event(self, kind: str, **details: Any) -> dict:
        return self.bundle.event(kind, **details)

    def tell(self, kind: str, line: str, **details: Any) -> None:
        """An event and its console line, in one call."""
        self.bundle.event(kind, **details)
        self.say(line)

    def modification(self, line: str, **details: Any) -> dict:
        """A live change into modifications.jsonl and its console line; returns the recorded entry."""
        entry = self.bundle.modification(**details)
        self.say(line)
        return entry

    def write_background(self) -> None:
        """The helper threads' events still queued, into the bundle and onto the console."""
        while True:
            try:
                kind, details = self.background.get_nowait()
            except queue.Empty:
                return
            self.tell(kind, f"-- {details.get('message', kind)}", **details)


@contextmanager
def stop_signals(handler: Callable) -> Iterator[None]:
    """Ctrl-C and SIGTERM go to `handler` for the run's length (from the main thread only: a run on
    another thread, as in tests, leaves signals alone)."""
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, previous in handlers.items():
            signal.signal(s, previous)
