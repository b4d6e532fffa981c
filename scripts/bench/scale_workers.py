"""Fake workers for `coordinator_scale.py`: the `Workers` interface of dimster/coordinator/workers/local.py
for hundreds of simulated workers, each reporting every second (`per_agent` K > 1: agents of K
workers each, an agent's workers' reports of a second merged into one, as remote/report_hold.py
sends them). The reports are made in a process of their own (`run_agents`), as real agents make
them on their hosts, and reach the coordinator as msgpack bytes through a pipe, decoded on the
loop's thread as `RemoteWorkers.receive` decodes them; the loop's thread also makes the clock probes
`RemoteWorkers` sends each agent every second (encoded, and their replies decoded).

The numbers keep the account closing: producer j of a topic sends `rate` records a second, all of
them acknowledged; consumer j of the topic's group settles what producer j had sent by its previous
report, and everything once producers stop, so a drain ends with nothing lost. A report's wire form
is built from each client's interval, made once (only the counts change), gathered into the
report's columns (worker/client_columns.py) as a worker does (`FakeFleet`)."""

import contextlib
import cProfile
import heapq
import math
import multiprocessing
import queue
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

import numpy as np

from dimster.clock import Deadline
from dimster.coordinator.workers.remote import GATHER_SECONDS, MOST_A_PASS
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
PENDING_EVERY = 0.25  # seconds between the agents' word of the groups' pending records


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


class FakeFleet:
    """The fake workers' clients, their numbers and their reports: what the agents' process runs."""

    def __init__(self, rate: int, per_agent: int):
        self.rate = rate  # records per producer per second
        self.workers_per_agent = per_agent
        self.agents = 1  # worker i on agent i mod agents
        self.producers: dict[int, list[Producer]] = {}  # worker -> its producers
        self.consumers: dict[int, list[Consumer]] = {}
        self.groups: list[str] = []
        self.stopped: set[int] = set()  # sent StopProducers
        self.publish = {
            ("publish", -1): _histogram(1, rate, 2_000.0),
            ("publish_delay", -1): _histogram(2, rate, 50.0),
        }
        self.e2e = {("e2e", p): _histogram(3 + p, max(1, rate // len(E2E_PARTITIONS)), 5_000.0) for p in E2E_PARTITIONS}

    def place(self, assignments: list[Assignment]) -> None:
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

    def stop_producers(self, index: int) -> None:
        self.stopped.add(index)
        for producer in self.producers[index]:
            producer.settle_limit = producer.next_sequence

    def pending(self) -> dict[str, int]:
        """Per group, records acknowledged and not yet settled: what FakeKafka reports as its lag."""
        left = dict.fromkeys(self.groups, 0)
        for consumers in self.consumers.values():
            for consumer in consumers:
                left[consumer.interval.group] += consumer.producer.next_sequence - consumer.settled
        return left

    # -- one report -----------------------------------------------------------------------------------
    def report(self, workers: list[int], end_time: float) -> bytes:
        """The `workers`' reports ending at `end_time`, as their agent sends them: merged, encoded."""
        return encode(Reported(merged([self._worker_report(index, end_time) for index in workers])))

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


def run_agents(pipe: Connection, rate: int, per_agent: int, aligned: bool, assignments: list[Assignment]) -> None:
    """The agents' process: Ready once its workers are placed, then each agent's report every second
    from StartLoad on (spread over the second unless `aligned`), a worker's last at its Close; the
    groups' pending records every 0.25 s. What the coordinator sends is read at once, and what goes
    to it is sent, each on a thread of its own: reports are made when due and queue without bound
    while the loop is behind, as agents' messages queue in the coordinator's sockets (a report of 16
    workers is larger than the pipe's buffer: made and sent in turn, each report would wait for the
    loop to read the one before). Ends with the coordinator's "end" or once its end of the pipe is
    closed."""
    fleet = FakeFleet(rate, per_agent)
    fleet.place(assignments)
    commands: queue.SimpleQueue[tuple[str, int, float]] = queue.SimpleQueue()
    outbox: queue.SimpleQueue[tuple] = queue.SimpleQueue()

    def read() -> None:
        with contextlib.suppress(EOFError, OSError):
            while True:
                commands.put(pipe.recv())
        commands.put(("end", -1, 0.0))

    def write() -> None:
        with contextlib.suppress(OSError):
            while True:
                pipe.send(outbox.get())

    threading.Thread(target=read, daemon=True).start()
    threading.Thread(target=write, daemon=True).start()
    outbox.put(("ready", -1, 0, None))
    workers = len(assignments)
    due: list[tuple[float, int]] = []  # heap of (epoch s, agent): each agent's next report
    closed: set[int] = set()
    made: dict[int, int] = dict.fromkeys(range(workers), 0)  # per worker, the reports made of it
    told = 0.0
    while True:
        wait = max(0.0, min(due[0][0] if due else math.inf, told + PENDING_EVERY) - time.time())
        with contextlib.suppress(queue.Empty):
            kind, index, at = commands.get(timeout=wait)
            if kind == "start" and index == index % fleet.agents:  # its agent's first worker: its reports start
                offset = 0.0 if aligned else index / fleet.agents
                heapq.heappush(due, (at + offset + 1.0, index))
            elif kind == "stop":
                fleet.stop_producers(index)
                outbox.put(("stopped", index, 1, None))
            elif kind == "close":
                outbox.put(("report", index, 1, fleet.report([index], time.time())))  # its last
                made[index] += 1
                outbox.put(("pending", -1, 0, fleet.pending()))
                outbox.put(("closed", index, 1, made[index]))
                closed.add(index)
            elif kind == "end":
                return
        now = time.time()
        while due and due[0][0] <= now:
            at, agent = heapq.heappop(due)
            mine = [w for w in range(agent, workers, fleet.agents) if w not in closed]
            if mine:
                heapq.heappush(due, (at + 1.0, agent))
                outbox.put(("report", mine[0], len(mine), fleet.report(mine, at)))
                for worker in mine:
                    made[worker] += 1
        if now - told >= PENDING_EVERY:
            outbox.put(("pending", -1, 0, fleet.pending()))
            told = now


class ScaleWorkers:
    def __init__(
        self,
        rate: int = 10,
        aligned: bool = False,
        profiler: cProfile.Profile | None = None,
        per_agent: int = 1,
    ):
        self.rate = rate
        self.aligned = aligned  # every worker reports at the same moment, not spread over the second
        self.profiler = profiler  # on while measuring: the loop's thread from StartLoad to StopProducers
        self.fleet = FakeFleet(rate, per_agent)  # the placement, as the agents' process has it
        self.agents_process: BaseProcess | None = None
        self.pipe: Connection | None = None
        self.left: dict[str, int] = {}  # per group, records not yet settled (the agents' word, 4 times a second)
        self.closed: set[int] = set()
        self.measuring = False  # between StartLoad and StopProducers: the coordinator's own cost is measured
        self.measured_seconds = 0.0  # how long that was
        self.own_cpu_seconds = 0.0  # the agents' side of the clock probes, made on this thread
        self.reports = 0  # reports taken while measuring (an agent's one for its workers)
        self.lines = 0  # the workers' reports in them
        self.lines_taken = 0  # the workers' reports taken in all, before, during and after the load
        self.lines_made = 0  # those the agents say they made, of the workers closed so far
        self.next_probe = 0.0
        self.wire_bytes = 0  # of the reports taken while measuring

    @property
    def producers(self) -> dict[int, list[Producer]]:
        return self.fleet.producers

    @property
    def consumers(self) -> dict[int, list[Consumer]]:
        return self.fleet.consumers

    # -- the Workers interface --------------------------------------------------------------------
    def start(self, assignments: list[Assignment]) -> None:
        self.fleet.place(assignments)
        self.left = self.fleet.pending()
        spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing of the loop's threads
        self.pipe, theirs = spawn.Pipe()
        per_agent = self.fleet.workers_per_agent
        self.agents_process = spawn.Process(
            target=run_agents, args=(theirs, self.rate, per_agent, self.aligned, assignments), daemon=True
        )
        self.agents_process.start()
        theirs.close()

    def send(self, index: int, message: Message) -> None:
        if index in self.closed or self.pipe is None:
            return
        if isinstance(message, StartLoad):
            if not self.measuring and not self.measured_seconds:
                self.measuring, self.measured_seconds = True, time.monotonic()
                if self.profiler:
                    self.profiler.enable()
            self.pipe.send(("start", index, message.at))
        elif isinstance(message, StopProducers):
            if self.measuring:
                self.measuring, self.measured_seconds = False, time.monotonic() - self.measured_seconds
                if self.profiler:
                    self.profiler.disable()
            self.pipe.send(("stop", index, 0.0))
        elif isinstance(message, Close):
            self.pipe.send(("close", index, 0.0))

    def receive(self, timeout: float, doorbell: int | None = None) -> list[tuple[int, Message | WorkerLost]]:
        """What comes within `timeout`, as RemoteWorkers takes it (the bench sends no control request:
        the `doorbell` is not waited on): once something has come, what else comes within
        GATHER_SECONDS, at most MOST_A_PASS workers' lines; the reports decoded at the pass's end."""
        received: list[tuple[int, Message | WorkerLost | bytes]] = []
        self._probe(time.time())
        deadline, room = Deadline(timeout), MOST_A_PASS
        while self.pipe is not None and room > 0 and self.pipe.poll(deadline.left()):
            try:
                kind, index, lines, data = self.pipe.recv()
            except EOFError:  # the agents' process has ended, which it does only when told to
                self.pipe = None
                raise RuntimeError("the fake workers' agents' process ended on its own") from None
            if kind == "report":
                received.append((index, data))  # decoded at the pass's end, as RemoteWorkers does
                room -= lines
                self.lines_taken += lines
                if self.measuring:
                    self.reports += 1
                    self.lines += lines
                    self.wire_bytes += len(data)
            elif kind == "ready":
                received += [(worker, Ready()) for worker in self.fleet.producers]  # each placed worker
            elif kind == "pending":
                self.left = data
            elif kind == "stopped":
                received.append((index, ProducersStopped()))
            elif kind == "closed":
                received.append((index, Closed()))
                self.closed.add(index)
                self.lines_made += data
            if received and deadline.left() > GATHER_SECONDS:
                deadline = Deadline(GATHER_SECONDS)
        return [(index, decode(m) if isinstance(m, bytes) else m) for index, m in received]

    def _probe(self, now: float) -> None:
        """RemoteWorkers' work on the loop's thread each second: a ProbeClock encoded per agent, its reply decoded."""
        if now < self.next_probe:
            return
        self.next_probe = now + 1.0
        agents, workers = self.fleet.agents, len(self.fleet.producers)
        for agent in range(agents):  # the agent's, not its workers'
            if any(w not in self.closed for w in range(agent, workers, agents)):
                encode(ProbeClock(now))
                started = time.thread_time()
                reply = encode(ClockProbed(now, now + 0.0001))  # the agent's work
                self.own_cpu_seconds += (time.thread_time() - started) if self.measuring else 0.0
                decode(reply)

    def close(self) -> list[str]:
        """The agents' process ended (it ends by itself once every worker is closed)."""
        if self.agents_process is not None:
            if self.pipe is not None:
                with contextlib.suppress(OSError):
                    self.pipe.send(("end", -1, 0.0))
                self.pipe.close()  # a send of theirs that waits on it ends
                self.pipe = None
            self.agents_process.join(10)
            if self.agents_process.is_alive():
                self.agents_process.kill()
                self.agents_process.join()
            self.agents_process = None
        return []

    def describe(self) -> list[dict]:
        return [
            {"index": i, "host": "memory", "address": f"memory:{i}", "cores": 2, "alive": i not in self.closed}
            for i in self.fleet.producers
        ]

    def clock_offsets(self) -> dict[int, dict]:
        return {}

    @property
    def pending(self) -> dict[str, range]:
        """Per group, records acknowledged and not yet settled: what FakeKafka reports as its lag."""
        return {group: range(n) for group, n in self.left.items()}
