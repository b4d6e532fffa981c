"""In-memory workers for `coordinator_scale.py`: the `Workers` interface of dimster/coordinator/workers/local.py
for hundreds of simulated workers, each reporting every second (`per_agent` K > 1: agents of K
workers each, an agent's workers' reports of a second merged into one, as remote/report_hold.py
sends them). Every report goes to the coordinator as msgpack bytes decoded on the loop's thread, as
`RemoteWorkers.receive` decodes them; with it the clock probes `RemoteWorkers` sends each agent every
second (encoded, and their replies decoded).

The numbers keep the account closing: producer j of a topic sends `rate` records a second, all of
them acknowledged; consumer j of the topic's group settles what producer j had sent by its previous
report, and everything once producers stop, so a drain ends with nothing lost. A report's wire form
is built from each client's interval, made once (only the counts change), gathered into the
report's columns (worker/client_columns.py) as a worker does; the fake's own CPU is measured
(`own_cpu_seconds`) and left out of the figures."""

import cProfile
import heapq
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from dimster.coordinator.workers.remote import MOST_A_PASS
from dimster.coordinator.workers.seam import WorkerLost
from dimster.coordinator.workers.topology import client_id
from dimster.metrics.histogram import Histogram
from dimster.worker.client_columns import columns_and_accounts
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import (
    Assignment,
    ClientInterval,
    ClockProbed,
    Close,
    Closed,
    IntervalReport,
    Message,
    ProbeClock,
    ProducersStopped,
    Ready,
    Reported,
    StartLoad,
    StopProducers,
    WakeLag,
    decode,
    encode,
    worker_report,
)
from dimster.worker.report_merge import merged
from dimster.worker.wire import Ranges

MESSAGE_SIZE = 1024
E2E_PARTITIONS = (0, 1)  # a consumer's records of a second come from two partitions
WAKE_LAG = {"wakes": 10, "lag_ms_sum": 2.0, "lag_ms_max": 0.5}


def _histogram(seed: int, count: int, median_us: float) -> tuple:
    """A histogram's wire form of `count` latencies around `median_us`, the same every second."""
    values = np.random.default_rng(seed).lognormal(np.log(median_us), 0.5, count)
    histogram = Histogram()
    histogram.record_array(values)
    return histogram.to_wire()


@dataclass
class Producer:
    client_id: str
    interval: ClientInterval  # its counts set anew at each report
    next_sequence: int = 0
    settle_limit: int = 0  # what its consumer may settle: what it had sent by its previous report


@dataclass
class Consumer:
    interval: ClientInterval  # its counts set anew at each report
    idle: ClientInterval  # an interval that took nothing in
    producer: Producer
    producer_id: int
    settled: int = 0  # sequences 0..settled-1 of its producer are settled


class ScaleWorkers:
    def __init__(
        self,
        rate: int = 10,
        aligned: bool = False,
        profiler: cProfile.Profile | None = None,
        per_agent: int = 1,
    ):
        self.rate = rate  # records per producer per second
        # an agent's workers' reports of a second go as one (remote/report_hold.py): worker i on agent i mod A
        self.workers_per_agent = per_agent
        self.agents = 1
        self.aligned = aligned  # every worker reports at the same moment, not spread over the second
        self.profiler = profiler  # on while measuring: the loop's thread from StartLoad to StopProducers
        self.producers: dict[int, list[Producer]] = {}  # worker -> its producers
        self.consumers: dict[int, list[Consumer]] = {}
        self.groups: list[str] = []
        self.outbox: deque[tuple[int, Message | bytes]] = deque()  # bytes: a report, decoded when received
        self.due: list[tuple[float, int]] = []  # heap of (epoch s, agent): each agent's next report
        self.closed: set[int] = set()  # sent Close: no report after its last
        self.stopped: set[int] = set()  # sent StopProducers
        self.measuring = False  # between StartLoad and StopProducers: the coordinator's own cost is measured
        self.measured_seconds = 0.0  # how long that was
        self.own_cpu_seconds = 0.0  # the fake's CPU building reports while measuring (this thread's)
        self.reports = 0  # reports handed over while measuring (an agent's one for its workers)
        self.lines = 0  # the workers' reports in them
        self.next_probe = 0.0
        self.wire_bytes = 0  # of the reports handed over while measuring

    # -- the Workers interface --------------------------------------------------------------------
    def start(self, assignments: list[Assignment]) -> None:
        self.publish = {
            ("publish", -1): _histogram(1, self.rate, 2_000.0),
            ("publish_delay", -1): _histogram(2, self.rate, 50.0),
        }
        e2e = {("e2e", p): _histogram(3 + p, max(1, self.rate // len(E2E_PARTITIONS)), 5_000.0) for p in E2E_PARTITIONS}
        self.e2e = e2e
        self.agents = max(1, -(-len(assignments) // self.workers_per_agent))
        by_place: dict[tuple[str, int], Producer] = {}  # (topic, index in topic) -> producer
        for a in assignments:
            self.producers[a.worker_index] = []
            for p in a.producers:
                interval = ClientInterval(
                    client_id(p), "producer", p.topic, library="librdkafka", generation=1, target_rate=float(self.rate)
                )  # fmt: skip
                producer = Producer(client_id(p), interval)
                self.producers[a.worker_index].append(producer)
                by_place[(p.topic, p.index_in_topic)] = producer
        # consumer j of a group (in the order of consumer ids) settles what producer j of its topic sends
        rank, seen = {}, {}
        for c in sorted((c for a in assignments for c in a.consumers), key=lambda c: c.consumer_id):
            rank[c.consumer_id], seen[c.group] = seen.get(c.group, 0), seen.get(c.group, 0) + 1
        self.groups = list(seen)
        for a in assignments:
            self.consumers[a.worker_index] = []
            for c in a.consumers:
                interval = ClientInterval(
                    client_id(c), "share_consumer", c.topic, c.group, library="librdkafka", generation=1
                )  # fmt: skip
                idle = ClientInterval(client_id(c), "share_consumer", c.topic, c.group, "librdkafka", 1)
                producer = by_place[(c.topic, rank[c.consumer_id])]
                consumer = Consumer(interval, idle, producer, int(producer.client_id[1:]))
                self.consumers[a.worker_index].append(consumer)
            self.outbox.append((a.worker_index, Ready()))

    def send(self, index: int, message: Message) -> None:
        if index in self.closed:
            return
        if isinstance(message, StartLoad):
            agent = index % self.agents
            if agent == index:  # its agent's first worker: the agent's reports start
                offset = 0.0 if self.aligned else agent / self.agents
                heapq.heappush(self.due, (message.at + offset + 1.0, agent))
            if not self.measuring and not self.measured_seconds:
                self.measuring, self.measured_seconds = True, time.monotonic()
                if self.profiler:
                    self.profiler.enable()
        elif isinstance(message, StopProducers):
            if self.measuring:
                self.measuring, self.measured_seconds = False, time.monotonic() - self.measured_seconds
                if self.profiler:
                    self.profiler.disable()
            self.stopped.add(index)
            for producer in self.producers[index]:
                producer.settle_limit = producer.next_sequence
            self.outbox.append((index, ProducersStopped()))
        elif isinstance(message, Close):
            self.outbox.append((index, self._report([index], time.time())))  # its last, decoded in receive()
            self.outbox.append((index, Closed()))
            self.closed.add(index)

    def receive(self, timeout: float, doorbell: int | None = None) -> list[tuple[int, Message | WorkerLost]]:
        """What is waiting, and the reports due by now once the first is due or `timeout` passes (the bench
        sends no control request: the `doorbell` is not waited on): at most
        MOST_A_PASS of them, as RemoteWorkers takes, and one per worker, so that a loop that falls behind
        sees its report lag grow and still ends its run (its workers' later reports, which real agents
        would queue, are not made)."""
        now = time.time()
        if not self.outbox:
            wake = min(now + timeout, self.due[0][0] if self.due else now + timeout)
            if wake > now:
                time.sleep(wake - now)
            now = time.time()
        received: list[tuple[int, Message | WorkerLost]] = [
            (index, decode(m) if isinstance(m, bytes) else m) for index, m in self.outbox
        ]
        self.outbox.clear()
        self._probe(now)
        later = []  # each worker's next report: in a later pass, however far behind the loop is
        taken = len(received)  # a report counts its workers' lines, as RemoteWorkers counts them
        while self.due and self.due[0][0] <= now and taken < MOST_A_PASS:
            at, agent = heapq.heappop(self.due)
            workers = [w for w in range(agent, len(self.producers), self.agents) if w not in self.closed]
            if workers:
                later.append((at + 1.0, agent))
                received.append((workers[0], decode(self._report(workers, at))))
                taken += len(workers)
        for due in later:
            heapq.heappush(self.due, due)
        return received

    def _probe(self, now: float) -> None:
        """RemoteWorkers' work on the loop's thread each second: a ProbeClock encoded per agent, its reply decoded."""
        if now < self.next_probe:
            return
        self.next_probe = now + 1.0
        for agent in range(self.agents):  # the agent's, not its workers'
            if any(w not in self.closed for w in range(agent, len(self.producers), self.agents)):
                encode(ProbeClock(now))
                started = time.thread_time()
                reply = encode(ClockProbed(now, now + 0.0001))  # the agent's work
                self.own_cpu_seconds += (time.thread_time() - started) if self.measuring else 0.0
                decode(reply)

    def close(self) -> list[str]:
        return []

    def describe(self) -> list[dict]:
        return [
            {"index": i, "host": "memory", "address": f"memory:{i}", "cores": 2, "alive": i not in self.closed}
            for i in self.producers
        ]

    def clock_offsets(self) -> dict[int, dict]:
        return {}

    @property
    def pending(self) -> dict[str, range]:
        """Per group, records acknowledged and not yet settled: what FakeKafka reports as its lag."""
        left = {group: 0 for group in self.groups}
        for consumers in self.consumers.values():
            for consumer in consumers:
                group = consumer.interval.group
                left[group] += consumer.producer.next_sequence - consumer.settled
        return {group: range(n) for group, n in left.items()}

    # -- one report -----------------------------------------------------------------------------------
    def _report(self, workers: list[int], end_time: float) -> bytes:
        """The `workers`' reports ending at `end_time`, as their agent sends them: merged, encoded."""
        started = time.thread_time()
        data = encode(Reported(merged([self._worker_report(index, end_time) for index in workers])))
        if self.measuring:
            self.own_cpu_seconds += time.thread_time() - started
            self.reports += 1
            self.lines += len(workers)
            self.wire_bytes += len(data)
        return data

    def _worker_report(self, index: int, end_time: float) -> IntervalReport:
        """Worker `index`'s report ending at `end_time`, as the worker makes it."""
        producing = index not in self.stopped
        clients = [self._producer(p, producing) for p in self.producers[index]]
        latencies = [self.publish if producing else {} for _ in clients]
        consumers = [self._consumer(c, end_time) for c in self.consumers[index]]
        latencies += [self.e2e if c.received else {} for c in consumers]
        gathered, groups = columns_and_accounts(clients + consumers)  # as a worker does: ranges merged per group
        usage = (0.05, 400_000_000, 90, WakeLag(**WAKE_LAG))
        report = worker_report(index, end_time, gathered, *usage, histograms=HistogramColumns.gather(latencies))
        report.groups = groups
        return report

    def _producer(self, producer: Producer, producing: bool) -> ClientInterval:
        if producing:
            producer.settle_limit = producer.next_sequence
        sent = self.rate if producing else 0
        producer.next_sequence += sent
        c = producer.interval
        c.sent, c.sent_bytes, c.acked, c.next_sequence = sent, sent * MESSAGE_SIZE, sent, producer.next_sequence
        return c

    def _consumer(self, consumer: Consumer, end_time: float) -> ClientInterval:
        first, last = consumer.settled, consumer.producer.settle_limit
        consumer.settled = max(first, last)
        count = last - first
        if count <= 0:
            return consumer.idle
        c = consumer.interval
        c.received, c.received_bytes, c.accepted, c.polls = count, count * MESSAGE_SIZE, count, 1 + count // 4
        c.max_poll_records, c.max_poll_partitions, c.delivery_counts = min(count, 4), 1, {1: count}
        c.settled = {consumer.producer_id: Ranges([(first, last - 1)])}
        c.first_received_at, c.last_received_at = end_time - 0.9, end_time - 0.1
        return c
