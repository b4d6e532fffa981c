"""A producer load client: paces records to the workload's rate (or schedule) and counts what its
Kafka client hands over, acknowledges and fails."""

import logging
import math
import threading
import time

import numpy as np

from dimster.clients import ProducerDriver
from dimster.worker import clock
from dimster.worker.clients.drivers import producer_driver
from dimster.worker.clients.load_client import LoadClient
from dimster.worker.clients.pacing import WORKER_PACING, Pass
from dimster.worker.protocol import WARMUP_PREFIX, ClientInterval, ProducerSpec
from dimster.workload.distributor import distributor
from dimster.workload.model import Workload
from dimster.workload.schedule import Pacer, rate_at

log = logging.getLogger("dimster.worker")
ACKS_EVERY = 0.01  # seconds between collections of a producer's acknowledgements


class ProducerClient(LoadClient):
    role = "producer"

    def __init__(
        self, spec: ProducerSpec, workload: Workload, bootstrap: str, total_producers: int, security: dict | None = None
    ):
        # Reads self.workload and self.total_producers on every pass: the worker replaces them live.
        self.spec = spec
        super().__init__(f"p{spec.producer_id}", spec.topic, "", workload.client_library.producer)
        self.workload = workload
        self.total_producers = total_producers
        self.bootstrap = bootstrap
        self.security = security or {}  # the cluster's client security (kafka/security.py)
        self.load_started: float | None = None  # epoch seconds; set by the worker when load starts
        self.sequence = 0
        self.ready = threading.Event()  # its first Kafka client is built and knows the topic

    def _carry_over(self, previous: ClientInterval) -> None:
        self.interval.next_sequence = self.sequence
        self.interval.target_rate = previous.target_rate

    def target_rate(self, now: float) -> float:
        assert self.load_started is not None  # run() produces only once load has started
        w = self.workload
        return rate_at(w.producer_rate_schedule, w.producer_rate, now - self.load_started) / self.total_producers

    def _count_acks(self, driver: ProducerDriver) -> None:
        """Move the driver's acknowledgements and failures into the interval (lock held). An ack
        counts for the phase it arrives in: within milliseconds of the send it answers."""
        latencies, failed = driver.take_acks()
        if len(latencies):
            self.interval.acked += len(latencies)
            metric = "publish" if clock.now() >= self.measure_from else WARMUP_PREFIX + "publish"
            self.histograms[(metric, -1)].record_array(latencies)
        if failed:
            self.interval.send_errors += len(failed)
            self.interval.failed_sequences.extend(failed)

    def run(self) -> None:
        try:
            driver = self._driver()  # before load starts: connecting and the first metadata are not measured
        finally:
            self.ready.set()  # built, or failed (the worker reports its error)
        while self.load_started is None and not self.stopping.is_set():
            time.sleep(0.01)
        # Pace from when load starts or, for a producer added to a running load, from now.
        pacer = Pacer(max(self.load_started or 0.0, clock.now()))
        while True:  # each pass is one client; `recreate` starts the next
            self.wake.clear()
            self._produce_until_recreated(driver, pacer)
            if self.stopping.is_set():
                return
            self.recreate.clear()
            driver = self._driver()

    def _driver(self) -> ProducerDriver:
        """A Kafka client built from the current workload."""
        w = self.workload
        driver = producer_driver(w, self.bootstrap, self.client_id, self.spec, self._on_stats, self.security)
        self._new_generation(w.client_library.producer)
        return driver

    def _produce_until_recreated(self, driver: ProducerDriver, pacer: Pacer) -> None:
        """Send on schedule with this client until stopped or recreated; then flush, so nothing in
        flight is lost. Sequence numbers and pacing carry over."""
        w = self.workload
        choose = distributor(
            w.message_distributor,
            w.partitions_per_topic,
            self.spec.index_in_topic,
            zipf_alpha=w.zipf_alpha,
            key_count=w.key_count,
        )
        try:
            self._produce(driver, pacer, choose)
        finally:
            remaining = driver.close(60)
            with self.lock:
                self._count_acks(driver)
            if remaining:
                log.warning("%s: %d records unacknowledged at close: counted as failed", self.client_id, remaining)

    def _produce(self, driver: ProducerDriver, pacer: Pacer, choose) -> None:
        """Send on schedule: this client's passes run on the worker's pacing loop (pacing.py) until it
        is stopped or recreated, or a pass fails (raised here, on the client's own thread)."""
        failures: list[Exception] = []

        def failed(e: Exception) -> None:
            failures.append(e)
            self.wake.set()

        WORKER_PACING.join(self, self._pass_of(driver, pacer, choose), failed)
        try:
            while not (self.stopping.is_set() or self.recreate.is_set() or failures):
                self.wake.wait(1.0)
                self.wake.clear()
        finally:
            WORKER_PACING.leave(self)
        if failures:
            raise failures[0]

    def _pass_of(self, driver: ProducerDriver, pacer: Pacer, choose) -> Pass:
        """One pass: the records due since the last, handed to the client and counted; returns when the
        next falls due (epoch s)."""
        acks_due = 0.0  # monotonic time the driver's acknowledgements are next collected

        def run_pass() -> float:
            nonlocal acks_due
            if self.stopping.is_set() or self.recreate.is_set():  # its thread is on its way to leave
                return math.inf
            now = clock.now()
            rate = self.target_rate(now)
            due = pacer.due(now, rate, limit=20_000)
            if due:
                handed_over, sent_bytes = driver.send(self.sequence, due, [choose() for _ in due])
                handed_over = handed_over - clock.offset()  # the driver's times are this host's
            driver.serve()
            with self.lock:
                self.interval.target_rate = rate
                if due:
                    intended = np.array(due)
                    delays = np.maximum(handed_over - intended, 0.0) * 1e6
                    measured = intended >= self.measure_from
                    self.histograms[("publish_delay", -1)].record_array(delays[measured])
                    self.histograms[(WARMUP_PREFIX + "publish_delay", -1)].record_array(delays[~measured])
                    self.interval.sent += len(due)
                    self.interval.sent_bytes += sent_bytes
                    self.sequence += len(due)
                if time.monotonic() >= acks_due:  # not every pass: each collection costs calls into the client
                    self._count_acks(driver)
                    acks_due = time.monotonic() + ACKS_EVERY
                self.interval.next_sequence = self.sequence
            return pacer.next_due(rate)

        return run_pass
