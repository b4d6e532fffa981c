"""The Kafka clients a worker hosts (confluent-kafka / librdkafka), one thread each.

Every client keeps its counts and histograms for the current interval under a lock; the worker's
main thread swaps them out once a second with `take_interval()`.
"""

import contextlib
import json
import logging
import random
import threading
import time
from collections import defaultdict

import numpy as np
from confluent_kafka import AcknowledgeType, Consumer, KafkaException, Producer, ShareConsumer

from dimster.metrics.client_stats import extract_client_stats
from dimster.metrics.histogram import Histogram
from dimster.metrics.sequences import to_ranges
from dimster.worker.protocol import ClientInterval, ConsumerSpec, ProducerSpec
from dimster.workload.distributor import distributor
from dimster.workload.model import Workload
from dimster.workload.payload import make_bodies, pack_header, unpack_header
from dimster.workload.processing import makespan_ms, processing_times_ms
from dimster.workload.schedule import Pacer, rate_at

STATS_INTERVAL_MS = 5000
log = logging.getLogger("dimster.worker")


def client_config(workload: Workload, role_config: dict, bootstrap: str, client_id: str, stats_cb) -> dict:
    config = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "statistics.interval.ms": STATS_INTERVAL_MS,
        **{k: v for k, v in workload.kafka_config.common_config.items()},
        **role_config,
        "logger": logging.getLogger(f"librdkafka.{client_id}"),
        "stats_cb": stats_cb,
    }
    return config


class LoadClient:
    """The parts every client shares: a thread, a stop flag, interval state and librdkafka stats."""

    role = ""

    def __init__(self, client_id: str, topic: str, group: str = ""):
        self.client_id, self.topic, self.group = client_id, topic, group
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.recreate = threading.Event()  # close the client and build a new one from the current workload
        self.wake = threading.Event()  # cuts a pacing or processing pause short (set with stopping/recreate)
        self.thread = threading.Thread(target=self._run_guarded, name=client_id, daemon=True)
        self.error: str | None = None
        self._latest_stats: dict | None = None
        self._reset()

    def _reset(self) -> None:
        self.interval = ClientInterval(self.client_id, self.role, self.topic, self.group)
        self.histograms: dict[tuple[str, int], Histogram] = defaultdict(Histogram)

    def _on_stats(self, stats_json: str) -> None:
        with contextlib.suppress(ValueError):
            self._latest_stats = extract_client_stats(json.loads(stats_json))

    def take_interval(self) -> ClientInterval:
        with self.lock:
            interval, histograms = self.interval, self.histograms
            self._reset()
            self._carry_over(interval)
        interval.histograms = {key: h.to_wire() for key, h in histograms.items() if h.total or h._filled}
        interval.client_stats, self._latest_stats = self._latest_stats, None
        return interval

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
            self.error = f"{self.client_id}: {type(e).__name__}: {e}"
            log.exception("client %s failed", self.client_id)

    def run(self) -> None:
        raise NotImplementedError


class ProducerClient(LoadClient):
    role = "producer"

    def __init__(self, spec: ProducerSpec, workload: Workload, bootstrap: str, total_producers: int):
        # Reads self.workload and self.total_producers on every pass: the worker replaces them live.
        self.spec = spec
        super().__init__(f"p{spec.producer_id}", spec.topic)
        self.workload = workload
        self.total_producers = total_producers
        self.bootstrap = bootstrap
        self.load_started: float | None = None  # epoch seconds; set by the worker when load starts
        self.sequence = 0
        self._acked_latencies: list[float] = []

    def _carry_over(self, previous: ClientInterval) -> None:
        self.interval.next_sequence = self.sequence
        self.interval.target_rate = previous.target_rate

    def target_rate(self, now: float) -> float:
        w = self.workload
        return rate_at(w.producer_rate_schedule, w.producer_rate, now - self.load_started) / self.total_producers

    def _on_delivery(self, err, msg) -> None:
        # Runs inside poll()/flush(), which this client calls with its lock held; latencies are
        # collected here and counted into the histogram per poll (cheaper than per record).
        if err is not None:
            self.interval.send_errors += 1
            header = unpack_header(msg.value())
            if header:
                self.interval.failed_sequences.append(header[1])
            return
        self._acked_latencies.append(msg.latency())

    def _count_acks(self) -> None:
        """Move the acknowledgements collected by `_on_delivery` into the interval (lock held)."""
        latencies = self._acked_latencies
        if latencies:
            self.interval.acked += len(latencies)
            self.histograms[("publish", -1)].record_array(np.array(latencies) * 1e6)
            latencies.clear()

    def run(self) -> None:
        while self.load_started is None and not self.stopping.is_set():
            time.sleep(0.01)
        # Pace from when load starts or, for a producer added to a running load, from now.
        pacer = Pacer(max(self.load_started or 0.0, time.time()))
        while not self.stopping.is_set():  # each pass is one client; `recreate` starts the next
            self.recreate.clear()
            self.wake.clear()
            self._produce_until_recreated(pacer)

    def _produce_until_recreated(self, pacer: Pacer) -> None:
        """Send on schedule with a client built from the current workload, until stopped or recreated;
        then flush, so nothing in flight is lost. Sequence numbers and pacing carry over."""
        w = self.workload
        config = client_config(w, w.kafka_config.producer_config, self.bootstrap, self.client_id, self._on_stats)
        producer = Producer({**config, "on_delivery": self._on_delivery})  # set once, not per record
        produce = producer.produce
        choose = distributor(
            w.message_distributor,
            w.partitions_per_topic,
            self.spec.index_in_topic,
            zipf_alpha=w.zipf_alpha,
            key_count=w.key_count,
        )
        bodies = make_bodies(w.message_size, w.payload.type, w.payload.compressible_ratio)
        producer_id, topic = self.spec.producer_id, self.topic
        while not self.stopping.is_set() and not self.recreate.is_set():
            now = time.time()
            rate = self.target_rate(now)
            due = pacer.due(now, rate, limit=20_000)
            with self.lock:
                self.interval.target_rate = rate
                sent_at = []
                sent_bytes = 0
                for intended in due:
                    key, partition = choose()
                    value = pack_header(producer_id, self.sequence, int(intended * 1e9)) + bodies[self.sequence & 15]
                    while True:
                        try:
                            if partition >= 0:
                                produce(topic, value, key, partition)
                            else:
                                produce(topic, value, key)
                            break
                        except BufferError:  # the client's queue is full: we are behind, let it drain
                            producer.poll(0.005)
                    sent_at.append(time.time())
                    sent_bytes += len(value)
                    self.sequence += 1
                if due:
                    delays = np.maximum(np.array(sent_at) - np.array(due), 0.0) * 1e6
                    self.histograms[("publish_delay", -1)].record_array(delays)
                    self.interval.sent += len(due)
                    self.interval.sent_bytes += sent_bytes
                producer.poll(0)
                self._count_acks()
                self.interval.next_sequence = self.sequence
            pause = pacer.next_due(rate) - time.time()
            if pause > 0:
                self.wake.wait(min(pause, 0.05))
        with self.lock:
            remaining = producer.flush(60)
            self._count_acks()
            self.interval.next_sequence = self.sequence
        if remaining:
            log.warning("%s: %d records still unacknowledged after flush", self.client_id, remaining)


class ConsumerClient(LoadClient):
    """A consumer-group member (CONSUMER_GROUP) or a share-group member (SHARE_GROUP)."""

    def __init__(self, spec: ConsumerSpec, workload: Workload, bootstrap: str, delivery_count_limit: int):
        self.role = "share_consumer" if spec.kind == "SHARE_GROUP" else "consumer"
        self.spec = spec
        super().__init__(f"c{spec.consumer_id}", spec.topic, spec.group)
        self.workload = workload
        self.bootstrap = bootstrap
        self.delivery_count_limit = delivery_count_limit
        self.rng = random.Random()
        self.subscribed = threading.Event()
        self.settled: dict[int, list[int]] = defaultdict(list)

    def take_interval(self) -> ClientInterval:
        with self.lock:
            settled, self.settled = self.settled, defaultdict(list)
        interval = super().take_interval()
        interval.settled = {pid: to_ranges(seqs) for pid, seqs in settled.items()}
        return interval

    def _client(self):
        w = self.workload
        if self.spec.kind == "SHARE_GROUP":
            config = dict(w.kafka_config.share_consumer_config)
            if w.acknowledgement.mode == "EXPLICIT":
                config["share.acknowledgement.mode"] = "explicit"
            config["group.id"] = self.group
            return ShareConsumer(client_config(w, config, self.bootstrap, self.client_id, self._on_stats)), None
        config = dict(w.kafka_config.consumer_config)
        batch = int(config.pop("max.poll.records", 500))  # a Java client setting: applied per consume() here
        config = {"auto.offset.reset": "earliest", **config, "group.id": self.group}
        return Consumer(client_config(w, config, self.bootstrap, self.client_id, self._on_stats)), batch

    def run(self) -> None:
        while not self.stopping.is_set():  # each pass is one client; `recreate` starts the next
            self.recreate.clear()
            self.wake.clear()
            self._consume_until_recreated()

    def _consume_until_recreated(self) -> None:
        consumer, batch = self._client()
        share = batch is None
        explicit = share and self.workload.acknowledgement.mode == "EXPLICIT"
        try:
            consumer.subscribe([self.topic])
            self.subscribed.set()
            while not self.stopping.is_set() and not self.recreate.is_set():
                messages = consumer.poll(0.2) if share else consumer.consume(batch, 0.2)
                if not messages:
                    continue
                self._record(messages, consumer if explicit else None)
                w = self.workload
                times = processing_times_ms(len(messages), w.consumer_proc_ms_min, w.consumer_proc_ms_max, self.rng)
                busy = makespan_ms(times, w.consumer_proc_parallelism)
                if busy > 0:
                    self.wake.wait(busy / 1000)
        finally:
            try:
                if share:  # settle the last poll (implicit mode accepts it here) before leaving the group
                    consumer.commit_sync()
                consumer.close()  # a share consumer releases whatever it still holds
            except KafkaException as e:
                log.warning("closing %s: %s", self.client_id, e)

    def _record(self, messages, acknowledging) -> None:
        now_ns = time.time_ns()
        ack = self.workload.acknowledgement
        with self.lock:
            interval = self.interval
            interval.polls += 1
            interval.max_poll_records = max(interval.max_poll_records, len(messages))
            for message in messages:
                if message.error():
                    log.warning("%s: %s", self.client_id, message.error())
                    continue
                value = message.value()
                interval.received += 1
                interval.received_bytes += len(value)
                header = unpack_header(value)
                outcome = AcknowledgeType.ACCEPT
                if acknowledging is not None:
                    draw = self.rng.random()
                    if draw < ack.release_fraction:
                        outcome = AcknowledgeType.RELEASE
                    elif draw < ack.release_fraction + ack.reject_fraction:
                        outcome = AcknowledgeType.REJECT
                    acknowledging.acknowledge(message, outcome)
                if self.role == "share_consumer":
                    count = message.delivery_count() or 1
                    interval.delivery_counts[count] = interval.delivery_counts.get(count, 0) + 1
                    if outcome == AcknowledgeType.RELEASE:
                        interval.released += 1
                        if count < self.delivery_count_limit:
                            continue  # it will come back: not settled yet
                    elif outcome == AcknowledgeType.REJECT:
                        interval.rejected += 1
                    else:
                        interval.accepted += 1
                if header is None:
                    continue
                producer_id, sequence, intended_ns = header
                self.settled[producer_id].append(sequence)
                self.histograms[("e2e", message.partition())].record(max(0, now_ns - intended_ns) / 1000)
