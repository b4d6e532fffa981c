"""The brokers' own metrics during a run: every SCRAPE_EVERY seconds a thread reads each broker's JMX
exporter endpoint and hands the samples to the run loop, which writes them into the bundle
(metrics/brokers/). A broker that does not answer (down, restarting) is noted once and scraped again
at the next turn; its missing samples never stop the run."""

import contextlib
import math
import threading
import time
import urllib.request
from http.client import HTTPException

from prometheus_client.parser import text_string_to_metric_families

SCRAPE_EVERY = 5.0
# A starved broker's exporter took over 4 s to answer beside a busy suite, and a round that times out
# loses its samples: an answer may take two beats (the beat then skips, it does not drift).
TIMEOUT = 10.0
WARM_UP_TIMEOUT = 30.0
KEPT_JVM = {"jvm_memory_used_bytes", "jvm_memory_max_bytes", "jvm_gc_collection_seconds_sum", "jvm_threads_current"}


def parse_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of the Kafka series and a few JVM ones of one exposition text."""
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("kafka_") or s.name in KEPT_JVM
    ]


def _failure(error: Exception) -> str:
    if isinstance(error, (OSError, HTTPException)):
        return f"do not answer ({getattr(error, 'reason', error)})"
    return f"answer what is not Prometheus's text format ({error})"  # ValueError, UnicodeDecodeError too


class BrokerScraper:
    def __init__(self, urls: dict[int, str], deliver, note):
        """`deliver(time, broker, samples)` gets each scrape; `note(message)` a broker's first failure
        (and its recovery). Both are called from the scraper's thread."""
        self.urls = urls
        self.deliver = deliver
        self.note = note
        self.failing: set[int] = set()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="broker-scrape", daemon=True)
        self.warming: threading.Thread | None = None

    def warm_up(self) -> None:
        """Scrape each broker once before load starts and discard the answers: a JMX exporter's first
        answer walks every MBean, which took a fresh broker over TIMEOUT seconds of CPU under load."""

        def scrape_quietly() -> None:
            for url in self.urls.values():
                with contextlib.suppress(Exception), urllib.request.urlopen(url, timeout=WARM_UP_TIMEOUT) as answer:
                    answer.read()

        self.warming = threading.Thread(target=scrape_quietly, name="broker-scrape-warm-up", daemon=True)
        self.warming.start()

    def start(self) -> None:
        if self.urls:
            self.thread.start()

    def scrape_once(self) -> None:
        at = time.time()  # one time for the round: the brokers' samples line up
        for broker, url in self.urls.items():
            try:
                with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
                    text = response.read()
                samples = parse_samples(text.decode())
            except (OSError, HTTPException, ValueError) as e:  # down, restarting, cut off, not an exporter
                if broker not in self.failing:
                    self.failing.add(broker)
                    self.note(f"broker {broker}'s metrics at {url} {_failure(e)}")
                continue
            if broker in self.failing:
                self.failing.discard(broker)
                self.note(f"broker {broker}'s metrics answer again")
            self.deliver(at, broker, samples)

    def _loop(self) -> None:
        if self.warming:  # an exporter still on its first answer is not asked twice at once
            self.warming.join(WARM_UP_TIMEOUT * len(self.urls))
        started, turn = time.monotonic(), 0
        # on a fixed beat from the first scrape, at load start (the baseline of the brokers' counters):
        # a slow answer delays the next scrape, not every one after it
        while True:
            self.scrape_once()
            turn = max(turn + 1, math.ceil((time.monotonic() - started) / SCRAPE_EVERY))
            if self.stopped.wait(max(0.0, started + turn * SCRAPE_EVERY - time.monotonic())):
                break

    def stop(self) -> None:
        """Stop the thread, then scrape once more: the bundle ends with the brokers' final counts."""
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(timeout=TIMEOUT * (len(self.urls) + 1))
            self.scrape_once()
