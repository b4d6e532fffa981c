"""The coordinator: one per running workload. It prepares the cluster and topics, starts the
workers, collects their reports, prints the status line, stops the run in order and records it."""

import multiprocessing
import signal
import time
import uuid
from dataclasses import dataclass
from multiprocessing.connection import wait as wait_for_connections
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from dimster.cluster.backend import ClusterBackend
from dimster.coordinator.aggregate import RunAggregate
from dimster.coordinator.console import status_line
from dimster.coordinator.topology import Topology, build_topology, split_over_workers
from dimster.errors import DimsterError
from dimster.kafka.admin import admin_client
from dimster.results.bundle import ResultsBundle
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.process import worker_main
from dimster.worker.protocol import Assignment
from dimster.workload.model import Workload

ADMIN_TIMEOUT = 15.0
FLUSH_EVERY = 5.0


class RunFailed(DimsterError):
    exit_code = 4


@dataclass
class WorkerHandle:
    index: int
    process: multiprocessing.Process
    connection: object
    ready: bool = False
    producers_stopped: bool = False
    closed: bool = False


class Coordinator:
    def __init__(self, workload: Workload, cluster: ClusterBackend, bundle: ResultsBundle, workers: int, say=print):
        self.workload = workload
        self.cluster = cluster
        self.bundle = bundle
        self.say = say
        self.run_id = uuid.uuid4().hex[:8]
        self.topology: Topology = build_topology(workload, self.run_id)
        self.worker_count = max(1, min(workers, len(self.topology.producers) + len(self.topology.consumers)))
        self.bootstrap = cluster.profile.bootstrap_servers
        self.aggregate = RunAggregate(self.topology.groups)
        self.workers: list[WorkerHandle] = []
        self.phase = "starting"
        self.stop_requested = 0
        self.failure: str | None = None
        self.load_started = 0.0
        self.metrics: MetricsWriter | None = None

    # ---- preparation ----------------------------------------------------------------------------
    def prepare_topics(self) -> int:
        """Create the run's topics (after a validate-only pass) and let share groups start at the
        earliest offset. Returns the broker's delivery-count limit for share groups."""
        admin = admin_client(self.bootstrap, **{"socket.connection.setup.timeout.ms": 10_000})
        w = self.workload
        replication = w.replication_factor or min(3, self.cluster.profile.nodes)
        config = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in w.kafka_config.topic_config.items()}
        topics = [NewTopic(t, w.partitions_per_topic, replication, config=config) for t in self.topology.topics]
        for validate_only in (True, False):
            futures = admin.create_topics(topics, validate_only=validate_only, request_timeout=ADMIN_TIMEOUT)
            for topic, future in futures.items():
                try:
                    future.result(timeout=ADMIN_TIMEOUT + 5)
                except KafkaException as e:
                    raise DimsterError(f"the cluster refused topic {topic}: {e.args[0].str()}") from None
                except TimeoutError:
                    raise DimsterError(
                        f"cluster at {self.bootstrap} did not answer within {ADMIN_TIMEOUT:.0f}s (unreachable?)"
                    ) from None
        if w.consumer_type == "SHARE_GROUP" and self.topology.groups:
            earliest = [ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)]
            resources = [
                ConfigResource(ConfigResource.Type.GROUP, g, incremental_configs=earliest) for g in self.topology.groups
            ]
            for future in admin.incremental_alter_configs(resources).values():
                future.result(timeout=ADMIN_TIMEOUT)
        broker = ConfigResource(ConfigResource.Type.BROKER, "1")
        [described] = admin.describe_configs([broker], request_timeout=ADMIN_TIMEOUT).values()
        entry = described.result(timeout=ADMIN_TIMEOUT).get("group.share.delivery.count.limit")
        return int(entry.value) if entry is not None and entry.value else 5

    def delete_topics(self) -> None:
        admin = admin_client(self.bootstrap)
        for future in admin.delete_topics(self.topology.topics, request_timeout=ADMIN_TIMEOUT).values():
            try:
                future.result(timeout=ADMIN_TIMEOUT + 5)
            except (KafkaException, TimeoutError) as e:
                self.say(f"could not delete topic: {e}")

    def start_workers(self, delivery_count_limit: int) -> None:
        context = multiprocessing.get_context("spawn")
        producers = split_over_workers(self.topology.producers, self.worker_count)
        consumers = split_over_workers(self.topology.consumers, self.worker_count)
        for index in range(self.worker_count):
            assignment = Assignment(
                worker_index=index,
                bootstrap_servers=self.bootstrap,
                workload=self.workload.model_dump(by_alias=True),
                producers=producers[index],
                consumers=consumers[index],
                total_producers=max(1, len(self.topology.producers)),
                delivery_count_limit=delivery_count_limit,
                log_file=str(self.bundle.path / "logs" / f"worker-{index}.log"),
            )
            ours, theirs = context.Pipe()
            process = context.Process(target=worker_main, args=(theirs, assignment), name=f"dimster-worker-{index}")
            process.start()
            self.workers.append(WorkerHandle(index, process, ours))
            self.bundle.event(
                "worker_started",
                worker=index,
                pid=process.pid,
                producers=len(producers[index]),
                consumers=len(consumers[index]),
            )
        self.bundle.run_info["workers"] = [{"index": w.index, "pid": w.process.pid} for w in self.workers]
        self.bundle.save_run_info()

    # ---- the run loop -----------------------------------------------------------------------------
    def _receive(self, timeout: float) -> None:
        """Handle whatever the workers sent within `timeout`; notice a worker that died."""
        live = {w.connection: w for w in self.workers if not w.closed}
        for connection in wait_for_connections(list(live), timeout=timeout):
            worker = live[connection]
            try:
                message = connection.recv()
            except (EOFError, OSError):
                self._worker_died(worker)
                continue
            kind = message[0]
            if kind == "report":
                self.aggregate.add(message[1])
                if self.metrics:
                    self.metrics.add(message[1], self.phase)
            elif kind == "ready":
                worker.ready = True
            elif kind == "producers_stopped":
                worker.producers_stopped = True
            elif kind == "closed":
                worker.closed = True
            elif kind == "failed":
                self._fail(message[1])
        for worker in self.workers:
            if not worker.closed and not worker.process.is_alive():
                self._worker_died(worker)

    def _worker_died(self, worker: WorkerHandle) -> None:
        if worker.closed:
            return
        worker.closed = True
        worker.process.join(1)
        self._fail(f"worker {worker.index} (pid {worker.process.pid}) exited with code {worker.process.exitcode}")

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
            self.bundle.event("run_failed", reason=reason)
            self.say(f"!! {reason}: stopping the run, keeping what was measured")

    def _on_signal(self, signum, _frame) -> None:
        self.stop_requested += 1
        if self.stop_requested == 1:
            self.say("stopping: producers stop, consumers drain (Ctrl-C again to force)")
        else:
            self.say("forcing stop")

    def _wait(self, condition, timeout: float, report_every: float) -> bool:
        deadline = time.time() + timeout
        next_line = time.time() + report_every
        while not condition():
            if time.time() > deadline or self.stop_requested > 1 or (self.failure and self.phase != "closing"):
                return condition()
            self._receive(0.2)
            self._tick()
            if time.time() >= next_line:
                self._print_line()
                next_line += report_every
        return True

    def _tick(self) -> None:
        if self.metrics and time.time() - self._last_flush >= FLUSH_EVERY:
            self.metrics.flush()
            self._last_flush = time.time()

    def _print_line(self) -> None:
        window = self.aggregate.take_window()
        self.last_window = window
        self.say(status_line(time.time() - self.load_started, self.phase, window))

    def run(self) -> int:
        """The whole run. Returns the process exit code (0, or 4 when a worker failed)."""
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._run()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _run(self) -> int:
        w = self.workload
        delivery_count_limit = self.prepare_topics()
        self.bundle.event("topics_created", topics=self.topology.topics, groups=list(self.topology.groups))
        self.start_workers(delivery_count_limit)
        self.say(
            f"run {self.run_id}: {len(self.topology.producers)} producer(s), {len(self.topology.consumers)} "
            f"consumer(s) on {self.worker_count} worker(s); results in {self.bundle.path}"
        )
        self.phase = "starting"
        if not self._wait(lambda: all(x.ready for x in self.workers), 120, 1e9):
            self._fail(self.failure or "workers did not get ready within 120 s")
        self.load_started = time.time() + 0.2
        self.metrics = MetricsWriter(self.bundle.path / "metrics", self.load_started)
        self._last_flush = time.time()
        for worker in self.workers:
            worker.connection.send(("start_load", self.load_started))
        self.aggregate.load_started = self.load_started
        self.aggregate.take_window()  # the first status line covers load only
        self.bundle.event("load_started", warmup_seconds=w.warmup_seconds, duration_seconds=w.duration_seconds)
        self.phase = "warmup" if w.warmup_seconds else "measure"
        end = self.load_started + w.warmup_seconds + w.duration_seconds if w.duration_seconds else float("inf")
        next_line = self.load_started + w.report_interval_seconds
        while not self.failure and not self.stop_requested and time.time() < end:
            self._receive(0.2)
            self._tick()
            if self.phase == "warmup" and time.time() >= self.load_started + w.warmup_seconds:
                self.phase = "measure"
                self.bundle.event("measure_started")
            if time.time() >= next_line:
                self._print_line()
                next_line += w.report_interval_seconds
        return self._stop()

    def _stop(self) -> int:
        w = self.workload
        forced = self.stop_requested > 1
        self.bundle.event("stopping", reason=self.failure or ("signal" if self.stop_requested else "duration"))
        self.phase = "drain"
        for worker in self.workers:
            if not worker.closed:
                worker.connection.send(("stop_producers",))
        self._wait(lambda: all(x.producers_stopped or x.closed for x in self.workers), 90, w.report_interval_seconds)
        if not self.failure and not forced:
            self.bundle.event("drain_started", backlog=self.aggregate.backlog)
            drained = self._wait(
                lambda: self.aggregate.backlog == 0, w.drain_timeout_seconds, w.report_interval_seconds
            )
            self.bundle.event("drain_ended", drained=drained, backlog=self.aggregate.backlog)
        self.phase = "closing"
        for worker in self.workers:
            if not worker.closed:
                worker.connection.send(("close",))
        self._wait(lambda: all(x.closed for x in self.workers), 5 if forced else 90, 1e9)
        for worker in self.workers:
            worker.process.join(5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(5)
                self.bundle.event("worker_killed", worker=worker.index, pid=worker.process.pid)
        self.phase = "done"
        if self.metrics:
            self.metrics.flush()
        if not w.keep_topics:
            self.delete_topics()
        return self._finish(forced)

    def _finish(self, forced: bool) -> int:
        a = self.aggregate
        totals = {
            "sent": a.sent,
            "acked": a.acked,
            "send_errors": a.send_errors,
            "received": a.received,
            "accepted": a.accepted,
            "released": a.released,
            "rejected": a.rejected,
            "duplicates": a.duplicates,
            "lost": a.lost(),
            "backlog": a.backlog,
        }
        status = "failed" if self.failure else ("forced" if forced else "completed")
        self.bundle.run_info.update(
            {
                "status": status,
                "failure": self.failure,
                "totals": totals,
                "ended": time.time(),
                "load_started": self.load_started,
                "topics": self.topology.topics,
                "groups": self.topology.groups,
            }
        )
        self.bundle.save_run_info()
        self.bundle.event("run_ended", status=status, **totals)
        self.say(
            f"run {status}: sent {a.sent:,} (acked {a.acked:,}), received {a.received:,}, "
            f"lost {totals['lost']:,}, duplicates {a.duplicates:,}; results in {self.bundle.path}"
        )
        if self.failure:
            raise RunFailed(f"run failed: {self.failure} (results kept in {self.bundle.path})")
        return 0


def results_root(option: Path | None, project: Path) -> Path:
    return option if option is not None else project / "results"
