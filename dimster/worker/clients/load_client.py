"""What every load client shares: a thread, a stop flag, interval state and client statistics.

Every client keeps its counts and histograms for the current interval under a lock; the worker's
main thread swaps them out once a second with `take_interval()`."""

import logging
import math
import threading
from collections import defaultdict
from typing import Any

import numpy as np

from dimster.clients.jvm import detach_thread
from dimster.metrics.histogram import Histogram
from dimster.worker.histogram_columns import ClientHistograms
from dimster.worker.protocol import ClientInterval

log = logging.getLogger("dimster.worker")


def distinct(values: np.ndarray) -> list[int]:
    """The distinct values, ascending. A poll holds a few records from a few partitions and producers:
    a set does that in a tenth of np.unique's time, and the worker's GIL is what its clients share."""
    return sorted(set(values.tolist()))


class LoadClient:
    """The parts every client shares: a thread, a stop flag, interval state and client statistics."""

    role = ""

    def __init__(self, client_id: str, topic: str, group: str, library: str):
        self.client_id, self.topic, self.group = client_id, topic, group
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.recreate = threading.Event()  # close the client and build a new one from the current workload
        self.wake = threading.Event()  # cuts a pacing or processing pause short (set with stopping/recreate)
        self.thread = threading.Thread(target=self._run_guarded, name=client_id, daemon=True)
        self.error: str | None = None
        self.library = library  # of the Kafka client it runs (or will run) now
        self.generation = 0  # the Kafka client it runs now: 1 for the first; live changes build the next
        # Epoch seconds the measured phase starts (load start + warm-up); the worker sets it when load
        # starts. Until then nothing counts as measured.
        self._measure_from = math.inf
        self.measure_known = threading.Event()
        self._latest_stats: dict | None = None
        self._reset()

    @property
    def measure_from(self) -> float:
        return self._measure_from

    @measure_from.setter
    def measure_from(self, at: float) -> None:
        self._measure_from = at
        self.measure_known.set()

    def _reset(self) -> None:
        self.interval = ClientInterval(
            self.client_id, self.role, self.topic, self.group, library=self.library, generation=self.generation
        )
        self.histograms: dict[tuple[str, int], Histogram] = defaultdict(Histogram)

    def _on_stats(self, stats: dict) -> None:
        self._latest_stats = stats

    def _new_generation(self, library: str) -> None:
        """A Kafka client was built. An interval that began under the previous one mixes the two: its
        generation is 0."""
        with self.lock:
            first = self.generation == 0
            self.generation += 1
            self.library = self.interval.library = library
            self.interval.generation = self.generation if first else 0

    def take_interval(self) -> tuple[ClientInterval, ClientHistograms]:
        """The interval so far and its histograms; the next begins."""
        with self.lock:
            interval, histograms = self.interval, self.histograms
            self._reset()
            self._carry_over(interval)
        interval.client_stats, self._latest_stats = self._latest_stats, None
        return interval, {key: h.to_wire() for key, h in histograms.items() if h.total or h._filled}

    def _carry_over(self, previous: ClientInterval) -> None:
        """Fields that are levels rather than deltas."""

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()

    def rebuild(self) -> None:
        self.recreate.set()
        self.wake.set()

    def _run_guarded(self) -> None:
        try:
            self.run()
        except Exception as e:  # reported to the coordinator, which stops the run cleanly
            if hasattr(e, "getMessage"):  # a Java exception: its simple name and message, once
                java: Any = e  # JPype's Java objects are untyped
                self.error = f"{self.client_id}: {java.getClass().getSimpleName()}: {java.getMessage()}"
            else:
                self.error = f"{self.client_id}: {type(e).__name__}: {e}"
            log.exception("client %s failed", self.client_id)
        finally:
            detach_thread()

    def run(self) -> None:
        raise NotImplementedError
