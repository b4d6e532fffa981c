"""The coordinator: one per running workload. It prepares the topics, starts the workers, collects
their reports, prints the status line, serves the control API (status, live modification, stop),
stops the run in order and records it."""

import multiprocessing
import queue
import signal
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from multiprocessing.connection import wait as wait_for_connections

from confluent_kafka import KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic

from dimster.clients.properties import check_client_configs, property_text
from dimster.cluster.backend import ClusterBackend, backend_for
from dimster.coordinator.aggregate import RunAggregate
from dimster.coordinator.changes import Change, live_changes
from dimster.coordinator.cluster_watch import BrokerWatch
from dimster.coordinator.console import status_line
from dimster.coordinator.control import ControlRequest, ControlServer
from dimster.coordinator.topology import Topology, build_topology, resize, split_over_workers
from dimster.errors import DimsterError
from dimster.kafka.admin import admin_client, describe_brokers, wait_until_partitions_serve
from dimster.kafka.distribution import kafka_distribution
from dimster.kafka.groups import AssignmentWatch, GroupSpec, unconsumed_records
from dimster.results.bundle import ResultsBundle
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.process import worker_main
from dimster.worker.protocol import Assignment
from dimster.workload.model import Workload, parse_workload
from dimster.workload.overrides import apply_overrides

ADMIN_TIMEOUT = 15.0
SERVE_TIMEOUT = 30.0  # for new partitions to be served (see wait_until_partitions_serve)
FLUSH_EVERY = 5.0
LOOP_TICK = 0.2
ASSIGNMENT_TIMEOUT = 120.0  # for every consumer to hold its assignment before load starts


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
    def __init__(
        self,
        workload: Workload,
        cluster: ClusterBackend,
        bundle: ResultsBundle,
        workers: int,
        control: ControlServer | None = None,
        say=print,
    ):
        self.workload = workload
        self.cluster = cluster
        self.bundle = bundle
        self.control = control
        self._say = say
        self.run_id = uuid.uuid4().hex[:8]
        self.topology: Topology = build_topology(workload, self.run_id)
        self.worker_count = max(1, min(workers, len(self.topology.producers) + len(self.topology.consumers)))
        self.bootstrap = cluster.profile.bootstrap_servers
        self.aggregate = RunAggregate(self.topology.groups)
        self.workers: list[WorkerHandle] = []
        self.placement: dict[str, int] = {}  # client id -> worker index
        self.phase = "starting"
        self.stop_requested = 0
        self.failure: str | None = None
        self.load_started = 0.0
        self.metrics: MetricsWriter | None = None
        self.last_window: dict = {}
        self.broker_watch: BrokerWatch | None = None  # once the cluster has said which brokers it has
        self.assignment_watches: list[AssignmentWatch] = []
        self.assignment_seconds: dict[str, float] = {}  # group -> seconds its consumers took to hold assignments
        # per group: records still there for it to consume, read once its consumers have closed
        self.unconsumed_by_group: dict[str, int] | None = None
        self.background: queue.Queue[tuple[str, dict]] = queue.Queue()  # events from helper threads
        self._last_flush = 0.0

    def say(self, line: str) -> None:
        """Print a line and keep it in console.log, secrets masked in both."""
        self._say(self.bundle.console(line))

    # ---- preparation ----------------------------------------------------------------------------
    def prepare_topics(self) -> int:
        """Create the run's topics (after a validate-only pass) and let share groups start at the
        earliest offset. Returns the broker's delivery-count limit for share groups."""
        brokers = describe_brokers(self.bootstrap, ADMIN_TIMEOUT)
        self.broker_watch = BrokerWatch(self.bootstrap, set(brokers))
        admin = admin_client(self.bootstrap, **{"socket.connection.setup.timeout.ms": 10_000})
        w = self.workload
        replication = w.replication_factor or min(3, len(brokers))
        config = {k: property_text(v) for k, v in w.kafka_config.topic_config.items()}
        topics = [NewTopic(t, w.partitions_per_topic, replication, config=config) for t in self.topology.topics]
        for validate_only in (True, False):
            futures = admin.create_topics(topics, validate_only=validate_only, request_timeout=ADMIN_TIMEOUT)
            self._admin_results(futures, "topic")
        if not wait_until_partitions_serve(
            self.bootstrap, {t: range(w.partitions_per_topic) for t in self.topology.topics}, SERVE_TIMEOUT
        ):
            raise DimsterError(f"the partitions of the run's topics were not served within {SERVE_TIMEOUT:.0f}s")
        if w.consumer_type == "SHARE_GROUP" and self.topology.groups:
            earliest = [ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)]
            resources = [
                ConfigResource(ConfigResource.Type.GROUP, g, incremental_configs=earliest) for g in self.topology.groups
            ]
            self._admin_results(admin.incremental_alter_configs(resources), "group")
        broker = ConfigResource(ConfigResource.Type.BROKER, str(brokers[0]))
        [described] = admin.describe_configs([broker], request_timeout=ADMIN_TIMEOUT).values()
        entry = described.result(timeout=ADMIN_TIMEOUT).get("group.share.delivery.count.limit")
        return int(entry.value) if entry is not None and entry.value else 5

    def _admin_results(self, futures: dict, what: str) -> None:
        for name, future in futures.items():
            try:
                future.result(timeout=ADMIN_TIMEOUT + 5)
            except KafkaException as e:
                raise DimsterError(f"the cluster refused {what} {name}: {e.args[0].str()}") from None
            except TimeoutError:
                raise DimsterError(
                    f"cluster at {self.bootstrap} did not answer within {ADMIN_TIMEOUT:.0f}s (unreachable?)"
                ) from None

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
                kafka_version=self.cluster.profile.kafka_version,
            )
            ours, theirs = context.Pipe()
            process = context.Process(target=worker_main, args=(theirs, assignment), name=f"dimster-worker-{index}")
            process.start()
            self.workers.append(WorkerHandle(index, process, ours))
            self.placement.update({f"p{p.producer_id}": index for p in producers[index]})
            self.placement.update({f"c{c.consumer_id}": index for c in consumers[index]})
            self.bundle.event(
                "worker_started",
                worker=index,
                pid=process.pid,
                producers=len(producers[index]),
                consumers=len(consumers[index]),
            )
        self.bundle.run_info["workers"] = [{"index": w.index, "pid": w.process.pid} for w in self.workers]
        self.bundle.save_run_info()

    # ---- consumers' assignments -------------------------------------------------------------------
    def _group_specs(self) -> dict[str, GroupSpec]:
        members = Counter(c.group for c in self.topology.consumers)
        kind = "share" if self.workload.consumer_type == "SHARE_GROUP" else "consumer"
        return {
            group: GroupSpec(kind, topic, members[group], self.workload.partitions_per_topic)
            for group, topic in self.topology.groups.items()
        }

    def _watch_assignments(self) -> AssignmentWatch | None:
        groups = {g: spec for g, spec in self._group_specs().items() if spec.members}
        if not groups:
            return None
        distribution = kafka_distribution(self.cluster.profile.kafka_version)
        watch = AssignmentWatch(distribution, self.bootstrap, groups, ASSIGNMENT_TIMEOUT)
        self.assignment_watches.append(watch)
        return watch

    def _await_assignments(self) -> None:
        """The start barrier: producers start only once every consumer holds its assignment, so that
        no record produced under measurement waits for a consumer still joining its group."""
        watch = self._watch_assignments()
        if watch is None:
            return
        self.say(f"waiting until each of the {len(self.topology.consumers)} consumer(s) holds its assignment")
        self._wait(lambda: watch.finished, ASSIGNMENT_TIMEOUT + 30, 1e9)
        self._note_assignments()
        if watch.outcome != "done":
            self._fail(watch.outcome or f"consumers did not hold their assignments within {ASSIGNMENT_TIMEOUT:.0f}s")

    def _note_assignments(self) -> None:
        """Record each group whose consumers all hold their assignment: at the start, and after a live
        change added consumers."""
        for watch in self.assignment_watches:
            live = self.load_started > 0
            for group, at in watch.take():
                seconds = round(at - watch.started, 3)
                if not live:
                    self.assignment_seconds[group] = seconds
                members = watch.groups[group].members
                self.bundle.event("consumers_assigned", group=group, members=members, seconds=seconds, live=live)
                self.say(f"-- group {group}: all {members} consumer(s) hold their assignment ({seconds:.1f}s)")
            if watch.finished and live and watch.outcome != "done":
                self.bundle.event("consumer_assignment_incomplete", reason=watch.outcome)
                self.say(f"-- {watch.outcome}")
        self.assignment_watches = [w for w in self.assignment_watches if not w.finished]

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

    def _send(self, worker_index: int, *message) -> None:
        worker = self.workers[worker_index]
        if not worker.closed:
            worker.connection.send(message)

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

    def _tick(self) -> None:
        """Work every loop pass does besides receiving: control requests, background events, flushing."""
        if self.control:
            while True:
                try:
                    self._serve(self.control.requests.get_nowait())
                except queue.Empty:
                    break
        while self.broker_watch:
            try:
                change, broker = self.broker_watch.changes.get_nowait()
            except queue.Empty:
                break
            self.bundle.event(f"broker_{change}", broker=broker)
            self.say(f"-- broker {broker} {'left the cluster' if change == 'left' else 'is back'}")
        while True:
            try:
                kind, details = self.background.get_nowait()
            except queue.Empty:
                break
            self.bundle.event(kind, **details)
            self.say(f"-- {details.get('message', kind)}")
        self._note_assignments()
        if self.metrics and time.time() - self._last_flush >= FLUSH_EVERY:
            self.metrics.flush()
            self._last_flush = time.time()

    def _wait(self, condition, timeout: float, report_every: float) -> bool:
        deadline = time.time() + timeout
        next_line = time.time() + report_every
        while not condition():
            if time.time() > deadline or self.stop_requested > 1 or (self.failure and self.phase != "closing"):
                return condition()
            self._receive(LOOP_TICK)
            self._tick()
            if time.time() >= next_line:
                self._print_line()
                next_line += report_every
        return True

    def _print_line(self) -> None:
        self.last_window = self.aggregate.take_window()
        self.say(status_line(time.time() - self.load_started, self.phase, self.last_window))

    def run(self) -> int:
        """The whole run. Returns the process exit code (0; RunFailed when a worker failed)."""
        handlers = {}
        if threading.current_thread() is threading.main_thread():
            handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._run()
        except DimsterError as e:
            if self.bundle.run_info.get("status") == "running":  # failed before it could finish: say so
                self.bundle.run_info.update({"status": "failed", "failure": str(e), "ended": time.time()})
                self.bundle.save_run_info()
            raise
        finally:
            if self.broker_watch:
                self.broker_watch.stop()
            for watch in self.assignment_watches:
                watch.stop()
            for s, handler in handlers.items():
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
        if not self._wait(lambda: all(x.ready for x in self.workers), 120, 1e9):
            self._fail(self.failure or "workers did not get ready within 120 s")
        if not self.failure:
            self._await_assignments()
        self.load_started = time.time() + LOOP_TICK
        self.metrics = MetricsWriter(self.bundle.path / "metrics", self.load_started)
        self._last_flush = time.time()
        for worker in self.workers:
            self._send(worker.index, "start_load", self.load_started)
        self.aggregate.load_started = self.load_started
        self.aggregate.restart_pacing_window()  # reports from before load start say nothing of pacing
        self.aggregate.take_window()  # the first status line covers load only
        self.broker_watch.start()
        self.bundle.event("load_started", warmup_seconds=w.warmup_seconds, duration_seconds=w.duration_seconds)
        self.phase = "warmup" if w.warmup_seconds else "measure"
        if self.control:
            self.control.update(phase="running")
        next_line = self.load_started + w.report_interval_seconds
        while not self.failure and not self.stop_requested and time.time() < self._end_time():
            self._receive(LOOP_TICK)
            self._tick()
            if self.phase == "warmup" and time.time() >= self.load_started + self.workload.warmup_seconds:
                self.phase = "measure"
                self.bundle.event("measure_started")
            if time.time() >= next_line:
                self._print_line()
                next_line = max(next_line + self.workload.report_interval_seconds, time.time() + 0.5)
        return self._stop()

    def _end_time(self) -> float:
        w = self.workload  # read every pass: durationSeconds can change live
        return self.load_started + w.warmup_seconds + w.duration_seconds if w.duration_seconds else float("inf")

    def _stop(self) -> int:
        forced = self.stop_requested > 1
        self.bundle.event("stopping", reason=self.failure or ("request" if self.stop_requested else "duration"))
        self.phase = "drain"
        if self.control:
            self.control.update(phase="stopping")
        every = self.workload.report_interval_seconds
        for worker in self.workers:
            self._send(worker.index, "stop_producers")
        self._wait(lambda: all(x.producers_stopped or x.closed for x in self.workers), 90, every)
        if not self.failure and not forced:
            self.bundle.event("drain_started", backlog=self.aggregate.backlog)
            drained = self._wait(lambda: self.aggregate.backlog == 0, self.workload.drain_timeout_seconds, every)
            self.bundle.event("drain_ended", drained=drained, backlog=self.aggregate.backlog)
        self.phase = "closing"
        for worker in self.workers:
            self._send(worker.index, "close")
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
        self._read_unconsumed()
        if not self.workload.keep_topics:
            self.delete_topics()
        return self._finish(forced)

    def _read_unconsumed(self) -> None:
        """Where each group stands now that its consumers have closed: records it could still consume
        (a drain that timed out, a forced stop) are unconsumed, not lost."""
        try:
            distribution = kafka_distribution(self.cluster.profile.kafka_version)
            self.unconsumed_by_group = unconsumed_records(distribution, self.bootstrap, self._group_specs())
        except DimsterError as e:
            self.bundle.event("group_positions_unknown", reason=str(e))
            self.say(f"-- {e}: 'lost' counts every record not consumed")

    @property
    def unconsumed(self) -> int | None:
        return None if self.unconsumed_by_group is None else sum(self.unconsumed_by_group.values())

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
            "lost": a.lost(self.unconsumed_by_group),
            "unconsumed": self.unconsumed,
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
                "consumer_assignment_seconds": self.assignment_seconds,
                "final_workload": self.workload.to_yaml_dict(),
            }
        )
        self.bundle.save_run_info()
        self.bundle.event("run_ended", status=status, **totals)
        self.say(
            f"run {status}: sent {a.sent:,} (acked {a.acked:,}), received {a.received:,}, "
            f"lost {totals['lost']:,}, unconsumed {_count(totals['unconsumed'])}, duplicates {a.duplicates:,}; "
            f"results in {self.bundle.path}"
        )
        if self.failure:
            raise RunFailed(f"run failed: {self.failure} (results kept in {self.bundle.path})")
        return 0

    # ---- the control API ----------------------------------------------------------------------------
    def _serve(self, request: ControlRequest) -> None:
        try:
            if request.action == "status":
                request.reply(self.status())
            elif request.action == "modify":
                request.reply(self.modify([(str(k), str(v)) for k, v in request.body.get("sets", [])]))
            elif request.action == "stop":
                self.stop_requested = max(self.stop_requested, 1)
                self.say("stop requested through the control API: producers stop, consumers drain")
                request.reply({"stopping": True, "results": str(self.bundle.path)})
            elif request.action == "event":
                details = {k: v for k, v in request.body.items() if k != "event"}
                self.bundle.event(str(request.body.get("event", "note")), **details)
                self.say(f"-- {request.body.get('message', request.body.get('event'))}")
                request.reply({"recorded": True})
        except DimsterError as e:
            request.reply({"error": str(e)}, status=400)
        except Exception as e:  # never leave a caller hanging; the run goes on
            request.reply({"error": f"internal error: {type(e).__name__}: {e}"}, status=500)

    def status(self) -> dict:
        window = self.last_window or {}
        return {
            "environment": self.cluster.profile.name,
            "runId": self.run_id,
            "results": str(self.bundle.path),
            "phase": self.phase,
            "elapsedSeconds": round(time.time() - self.load_started, 1) if self.load_started else 0.0,
            **self.aggregate.recent_rates(5.0),
            "sent": self.aggregate.sent,
            "acked": self.aggregate.acked,
            "received": self.aggregate.received,
            "backlog": self.aggregate.backlog,
            "duplicates": self.aggregate.duplicates,
            "sendErrors": self.aggregate.send_errors,
            # known once the consumers have closed at the end of the run
            "lost": self.aggregate.lost(self.unconsumed_by_group) if self.unconsumed_by_group is not None else None,
            "unconsumed": self.unconsumed,
            "e2eP50Ms": window.get("e2eP50Ms"),
            "e2eP99Ms": window.get("e2eP99Ms"),
            "publishP99Ms": window.get("publishP99Ms"),
            "recordsPerPoll": window.get("recordsPerPoll"),
            "maxPollRecords": window.get("maxPollRecords"),
            **self.aggregate.producer_batches(),
            "producers": len(self.topology.producers),
            "consumers": len(self.topology.consumers),
            "brokers": sorted(self.broker_watch.registered) if self.broker_watch else [],
            "workers": [{"index": w.index, "pid": w.process.pid, "alive": not w.closed} for w in self.workers],
            "settings": self.workload.to_yaml_dict(),
        }

    def modify(self, pairs: list[tuple[str, str]]) -> dict:
        """Validate the whole set, then apply it. Nothing changes when any part is invalid."""
        if self.phase not in ("warmup", "measure"):
            raise DimsterError(f"the run is {self.phase}: modifications apply only while load runs")
        old = self.workload
        new = parse_workload(apply_overrides(old.to_yaml_dict(), pairs), "--set")
        check_client_configs(new, "--set", self.cluster.profile.kafka_version)
        try:
            changes = live_changes(old.to_yaml_dict(), new.to_yaml_dict())
        except ValueError as e:
            raise DimsterError(f"--set: {e}") from None
        if not changes:
            return {"applied": [], "notes": ["nothing changed"]}
        effects = {c.effect for c in changes}
        admin = admin_client(self.bootstrap)
        topic_resources = self._topic_config_resources(new) if "topic-config" in effects else []
        new_partitions = (
            [NewPartitions(t, new.partitions_per_topic) for t in self.topology.topics]
            if "partitions" in effects
            else []
        )
        broker_cluster = self._broker_cluster(new) if "broker" in effects else None
        if topic_resources:  # validate on the broker first: all or nothing
            self._admin_results(admin.incremental_alter_configs(topic_resources, validate_only=True), "topic config")
        if new_partitions:
            self._admin_results(admin.create_partitions(new_partitions, validate_only=True), "partitions of")
        if broker_cluster is not None:
            broker_cluster.check_broker_config()

        applied_at = time.time()
        if topic_resources:
            self._admin_results(admin.incremental_alter_configs(topic_resources), "topic config")
        notes = []
        if new_partitions:
            self._admin_results(admin.create_partitions(new_partitions), "partitions of")
            grown = dict.fromkeys(self.topology.topics, range(old.partitions_per_topic, new.partitions_per_topic))
            if not wait_until_partitions_serve(self.bootstrap, grown, SERVE_TIMEOUT):
                notes.append(f"new partitions not served within {SERVE_TIMEOUT:.0f}s; producers use them anyway")
        self.workload = new
        if "client-count" in effects:
            self._resize_clients(new)
        if effects & {"rate", "client-count"}:
            self.aggregate.restart_pacing_window()
        for worker in self.workers:
            self._send(worker.index, "update", new.model_dump(by_alias=True), max(1, len(self.topology.producers)))
        if broker_cluster is not None:
            notes.append("broker config: redeploying in the background (watch the console and events)")
            threading.Thread(target=self._redeploy, args=(broker_cluster,), daemon=True).start()
        return {"applied": [self._record(change, applied_at) for change in changes], "notes": notes}

    def _record(self, change: Change, applied_at: float) -> dict:
        entry = self.bundle.modification(
            key=change.key, old=change.old, new=change.new, effect=change.effect, applied=applied_at
        )
        self.say(f"-- set {change.key}: {change.old} -> {change.new} ({change.effect})")
        return entry

    def _topic_config_resources(self, new: Workload) -> list[ConfigResource]:
        old = self.workload.kafka_config.topic_config
        wanted = new.kafka_config.topic_config
        entries = [
            ConfigEntry(k, property_text(v), incremental_operation=AlterConfigOpType.SET)
            for k, v in wanted.items()
            if old.get(k) != v
        ] + [ConfigEntry(k, "", incremental_operation=AlterConfigOpType.DELETE) for k in old if k not in wanted]
        return [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=entries) for t in self.topology.topics]

    def _resize_clients(self, new: Workload) -> None:
        added_producers, added_consumers, removed = resize(
            self.topology, new.producers_per_topic, new.consumers_per_group, new.consumer_type
        )
        by_worker: dict[int, list[str]] = {}
        for client_id in removed:
            by_worker.setdefault(self.placement.pop(client_id), []).append(client_id)
        for index, client_ids in by_worker.items():
            self._send(index, "remove_clients", client_ids)
        live = [w.index for w in self.workers if not w.closed]
        load = {i: sum(1 for w in self.placement.values() if w == i) for i in live}
        plan: dict[int, tuple[list, list]] = {i: ([], []) for i in live}
        for spec in [*added_producers, *added_consumers]:
            target = min(load, key=load.get)
            load[target] += 1
            is_producer = hasattr(spec, "producer_id")
            plan[target][0 if is_producer else 1].append(spec)
            self.placement[f"p{spec.producer_id}" if is_producer else f"c{spec.consumer_id}"] = target
        for index, (producers, consumers) in plan.items():
            if producers or consumers:
                self._send(index, "add_clients", producers, consumers)
        if added_consumers:
            self._watch_assignments()

    def _broker_cluster(self, new: Workload) -> ClusterBackend:
        profile = self.cluster.profile
        overrides = {**profile.broker_overrides, **new.broker_config}
        return backend_for(profile.model_copy(update={"broker_overrides": overrides}))

    def _redeploy(self, cluster: ClusterBackend) -> None:
        """Runs on a helper thread; reports through `background` so the main loop records it."""

        def progress(message: str) -> None:
            self.background.put(("cluster", {"message": message.strip()}))

        self.background.put(("broker_redeploy_started", {"message": "broker redeploy started"}))
        try:
            report = cluster.redeploy(progress)
            self.background.put(
                (
                    "broker_redeploy_done",
                    {
                        "message": f"broker redeploy done: dynamic {report.dynamic}, "
                        f"restarted nodes {report.restarted_nodes}",
                    },
                )
            )
        except DimsterError as e:
            self.background.put(("broker_redeploy_failed", {"message": f"broker redeploy failed: {e}"}))
        except Exception as e:  # a thread's failure must reach the run's events, not a thread traceback
            message = f"broker redeploy failed: {type(e).__name__}: {e}"
            self.background.put(("broker_redeploy_failed", {"message": message}))


def _count(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"
