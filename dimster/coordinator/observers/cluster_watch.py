"""Watches which brokers are registered while a run goes on, so the console and the event log show
brokers leaving and coming back (a redeploy from another terminal, a crash)."""

import queue
import threading

from dimster.kafka.admin import AuthenticationFailed, registered_brokers
from dimster.kafka.security import ClientSecurity


class BrokerWatch:
    def __init__(self, bootstrap_servers: str, expected: set[int], every: float = 1.0, security: ClientSecurity = None):
        self.bootstrap_servers = bootstrap_servers
        self.security = security  # the cluster's client security (kafka/security.py)
        self.registered = set(expected)
        self.changes: queue.Queue[tuple[str, int]] = queue.Queue()  # ("left" | "back", broker id)
        self.every = every
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="broker-watch", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _watch(self) -> None:
        while not self.stopping.wait(self.every):
            # short: a restarted broker is back within seconds, and a slow answer would miss its absence
            try:
                now = registered_brokers(self.bootstrap_servers, timeout=1.5, security=self.security)
            except AuthenticationFailed:  # the credentials worked at start: a passing refusal, not an exit
                now = set()
            if not now and self.registered and len(self.registered) > 1:
                continue  # no answer at all: keep the last view rather than report every broker gone
            for broker in sorted(self.registered - now):
                self.changes.put(("left", broker))
            for broker in sorted(now - self.registered):
                self.changes.put(("back", broker))
            self.registered = now
