"""In-memory stand-ins for a run's workers and its cluster, to drive the coordinator's loop (phases,
drain, resize, live changes, worker loss) without Kafka. Not a model of Kafka: records are plain
(producer id, sequence) pairs that each group's consumers share in turn.

The fake does its work a step at a time, a step each time the loop receives under load, not in time as
a worker does: a thread of the niced unit tier may wait seconds for a CPU, and a run that ended at its
duration alone could end with no step at all. So a fake run's load (FakeLoadPlan) ends at its duration
and no sooner than its workers' `steps_needed` steps, with a loop pass after the duration."""

import json
import queue
import time
from collections import defaultdict, deque
from types import SimpleNamespace

import numpy as np

from dimster.coordinator.loop.run import Coordinator
from dimster.coordinator.workers.seam import WorkerLost
from dimster.coordinator.workers.topology import client_id
from dimster.environment import parse_profile
from dimster.kafka.groups import LagSample
from dimster.metrics.histogram import Histogram
from dimster.metrics.sequences import to_ranges
from dimster.results.bundle import ResultsBundle
from dimster.worker.histogram_columns import ClientHistograms, HistogramColumns
from dimster.worker.protocol import (
    WARMUP_PREFIX,
    AddClients,
    Assignment,
    ClientInterval,
    Close,
    Closed,
    IntervalReport,
    ProducersStopped,
    Ready,
    RemoveClients,
    Reported,
    StartLoad,
    StopProducers,
    WakeLag,
    worker_report,
)
from dimster.workload.model import Workload
from dimster.workload.modes.base import PlanStep, SteadyPlan

E2E_MS = 5.0  # every record's end-to-end latency in the fake
PER_STEP = 10  # records each producer hands over per receive() while load runs
STEP_SECONDS = 0.02  # the most a receive() waits: the fake's clock, where a test needs one


class FakeWorkers:
    def __init__(
        self,
        lose_worker: int | None = None,
        lose_after_steps: int = 3,
        clocks: dict | None = None,
        waiting: dict[int, float] | None = None,
        steps_needed: int | None = None,
    ):
        self.lose_worker, self.lose_after_steps = lose_worker, lose_after_steps
        # the steps of load a test's story needs before the load may end (FakeLoadPlan): its loss's by default
        if steps_needed is None:
            steps_needed = lose_after_steps if lose_worker is not None else 0
        self.steps_needed = steps_needed
        self.waiting = waiting or {}  # worker -> the share of the time its wake probe waits to run
        self.last_report: dict[int, float] = {}
        self.clocks = clocks or {}  # what clock_offsets() answers
        self.clients: dict[int, dict[str, object]] = {}  # worker -> client id -> spec
        self.outbox: deque[tuple[int, object]] = deque()
        self.sent: list[tuple[int, object]] = []  # every message the coordinator sent, in order
        self.next_sequence: dict[int, int] = defaultdict(int)
        self.group_of_topic: dict[str, list[str]] = defaultdict(list)
        self.pending: dict[str, deque] = defaultdict(deque)  # group -> records not yet consumed
        self.loading = False
        self.producing = True
        self.lost: set[int] = set()
        self.steps = 0  # receives once load started
        self.passes = 0  # every receive
        self.load_started = 0.0  # StartLoad's
        self.reports_under_load = 0  # reports handed to the coordinator once load started

    # -- the Workers interface --------------------------------------------------------------------
    def start(self, assignments: list[Assignment]) -> None:
        for a in assignments:
            self.clients[a.worker_index] = {client_id(s): s for s in [*a.producers, *a.consumers]}
            for c in a.consumers:
                if c.group not in self.group_of_topic[c.topic]:
                    self.group_of_topic[c.topic].append(c.group)
            self.outbox.append((a.worker_index, Ready()))

    def send(self, index: int, message) -> None:
        if index in self.lost:
            return
        self.sent.append((index, message))
        if isinstance(message, StartLoad):
            self.loading, self.load_started = True, message.at
        elif isinstance(message, StopProducers):
            self.producing = False
            self.outbox.append((index, ProducersStopped()))
        elif isinstance(message, AddClients):
            for spec in [*message.producers, *message.consumers]:
                self.clients[index][client_id(spec)] = spec
        elif isinstance(message, RemoveClients):
            leaving = [self.clients[index].pop(c) for c in message.client_ids]
            self.outbox.append((index, Reported(self._report(index, time.time(), leaving))))
        elif isinstance(message, Close):
            self.outbox.append((index, Reported(worker_report(index, time.time(), []))))
            self.outbox.append((index, Closed()))

    def receive(self, timeout: float, doorbell: int | None = None):
        self.passes += 1
        time.sleep(min(timeout, STEP_SECONDS))
        received = list(self.outbox)
        self.outbox.clear()
        self.reports_under_load += sum(1 for _, m in received if isinstance(m, Reported) and self.loading)
        if self.loading:
            self.steps += 1
            if self.lose_worker is not None and self.steps == self.lose_after_steps:
                self.lost.add(self.lose_worker)
                received.append(
                    (self.lose_worker, WorkerLost(f"worker {self.lose_worker} (fake) went silent", time.time()))
                )
            for index, clients in self.clients.items():
                if index not in self.lost:
                    # its first report's wait counts from load start, as the coordinator's span does
                    now = time.time()
                    since = min(now, self.last_report.get(index, self.load_started))
                    self.last_report[index] = now
                    lag = WakeLag(10, self.waiting.get(index, 0.0) * (now - since) * 1000, 5.0)
                    report = self._report(index, now, list(clients.values()), wake_lag=lag)
                    received.append((index, Reported(report)))
                    self.reports_under_load += 1
        return received

    def close(self) -> list[str]:
        return []

    def describe(self) -> list[dict]:
        return [{"index": i, "host": "memory", "alive": i not in self.lost} for i in self.clients]

    def clock_offsets(self) -> dict[int, dict]:
        return self.clocks

    # -- what clients do in one step ----------------------------------------------------------------
    def _report(self, index: int, end_time: float, specs, **usage) -> IntervalReport:
        intervals = self._intervals(specs)
        histograms = HistogramColumns.gather(h for _, h in intervals)
        return worker_report(index, end_time, [c for c, _ in intervals], histograms=histograms, **usage)

    def _intervals(self, specs) -> list[tuple[ClientInterval, ClientHistograms]]:
        intervals: list[tuple[ClientInterval, ClientHistograms]] = []
        for spec in specs:
            if hasattr(spec, "producer_id"):
                sent = PER_STEP if self.producing and self.loading else 0
                first = self.next_sequence[spec.producer_id]
                self.next_sequence[spec.producer_id] += sent
                for group in self.group_of_topic[spec.topic]:
                    self.pending[group].extend((spec.producer_id, s) for s in range(first, first + sent))
                producer = ClientInterval(
                    client_id(spec), "producer", spec.topic, sent=sent, acked=sent,
                    next_sequence=self.next_sequence[spec.producer_id], target_rate=PER_STEP,
                )  # fmt: skip
                intervals.append((producer, {}))
            else:
                taken = [
                    self.pending[spec.group].popleft() for _ in range(min(PER_STEP, len(self.pending[spec.group])))
                ]
                settled: dict[int, list[int]] = defaultdict(list)
                for producer_id, sequence in taken:
                    settled[producer_id].append(sequence)
                interval = ClientInterval(
                    client_id(spec), "share_consumer", spec.topic, spec.group, received=len(taken),
                    accepted=len(taken), polls=1, settled={p: to_ranges(s) for p, s in settled.items()},
                )  # fmt: skip
                measured, warm = Histogram(), Histogram()  # 5 ms each; warm-up's 1 s must not count
                measured.record_array(np.full(len(taken), E2E_MS * 1000.0))
                warm.record_array(np.full(len(taken), 1_000_000.0))
                latencies = {("e2e", 0): measured.to_wire(), (WARMUP_PREFIX + "e2e", 0): warm.to_wire()}
                intervals.append((interval, latencies))
        return intervals


class _Watch:
    """An assignment watch that has seen every group assigned at once."""

    def __init__(self, groups):
        self.groups, self.started, self.outcome, self.finished = groups, time.time(), "done", True
        self._pending = list(groups)

    def take(self):
        taken, self._pending = [(g, self.started) for g in self._pending], []
        return taken

    def stop(self):
        pass


class FakeKafka:
    """The run's cluster side: topics are names, groups' positions are the fake workers' queues."""

    def __init__(self, workers: FakeWorkers):
        self.workers = workers
        self.deleted: list[str] = []
        self.dead_letter_topic: str | None = None  # a workload with deadLetterQueue is not run here

    def prepare(self, workload, topics, groups) -> int:
        return 5

    def group_config(self, group, prefix) -> dict[str, str]:
        return {f"{prefix}delivery.count.limit": "5"}

    def broker_watch(self):
        return SimpleNamespace(changes=queue.Queue(), registered={1}, start=lambda: None, stop=lambda: None)

    def watch_assignments(self, groups, timeout):
        return _Watch(groups)

    def watch_lag(self, groups, interval):
        return SimpleNamespace(take=list, stop=lambda: None, errors=queue.Queue(), read_now=self._positions)

    def _positions(self, timeout: float) -> LagSample:
        """What each group's fake workers have yet to take, as its one partition's lag."""
        return LagSample(time.time(), {g: {0: (0, len(records))} for g, records in self.workers.pending.items()})

    def delete_topics(self, topics) -> list[str]:
        self.deleted += topics
        return []


class FakeLoadPlan(SteadyPlan):
    """A steady run's end for the fake workers: at the duration, as a steady plan's, but no sooner than
    the workers' `steps_needed` steps of load, and a loop pass after the pass that first saw the
    duration pass. That pass receives a step of load and prints a status line (the duration is longer
    than a console window), however long the host kept the loop from running before it."""

    def __init__(self, workers: FakeWorkers):
        self.workers = workers
        self.past_duration = False

    def step(self, elapsed, workload, run) -> PlanStep:
        step = super().step(elapsed, workload, run)
        if step.done and (not self.past_duration or self.workers.steps < self.workers.steps_needed):
            self.past_duration = True
            return PlanStep()
        return step


def fake_cluster():
    profile = parse_profile({"name": "fake", "bootstrapServers": "memory:1", "backend": "external"})
    return SimpleNamespace(profile=profile, client_security=dict, broker_config=dict)


def coordinator(tmp_path, workers: FakeWorkers, capacity=2, on_worker_loss="fail", exporter=None, **keys):
    # the fake's drain settles within a step or two: its time-out only guards against a hang
    workload = Workload.model_validate(
        {"name": "w", "durationSeconds": 1.5, "reportIntervalSeconds": 0.5, "producersPerTopic": 2,
         "consumersPerGroup": 2, "drainTimeoutSeconds": 120, **keys}
    )  # fmt: skip
    bundle = ResultsBundle(tmp_path, workload.name)
    bundle.start(workload={"name": "w"}, environment={}, broker_config={}, kafka_version="4.3.1", run_id="r")
    return Coordinator(
        workload, fake_cluster(), bundle, workers, capacity, say=lambda _line: None,
        kafka=FakeKafka(workers), on_worker_loss=on_worker_loss, exporter=exporter, plan=FakeLoadPlan(workers),
    )  # fmt: skip


def events(c: Coordinator) -> list[dict]:
    return [json.loads(line) for line in (c.bundle.path / "events.jsonl").read_text().splitlines()]
