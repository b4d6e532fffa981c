"""The coordinator: one per running workload. It prepares the topics, starts the workers, collects
their reports, prints the status line, serves the control API (status, live modification, stop),
stops the run in order and records it."""

import queue
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from dimster.clients import REBALANCE_KINDS
from dimster.clients.properties import check_client_configs, java_versions
from dimster.cluster.backend import ClusterBackend
from dimster.cluster.backends import backend_for
from dimster.coordinator.account import ended_line, run_totals, why_open
from dimster.coordinator.aggregate import RunAggregate
from dimster.coordinator.broker_scrape import BrokerScraper
from dimster.coordinator.changes import Change, live_changes
from dimster.coordinator.cluster_watch import BrokerWatch
from dimster.coordinator.console import status_line
from dimster.coordinator.control import ControlRequest, ControlServer
from dimster.coordinator.correctness import correctness_verdict
from dimster.coordinator.crashes import CRASH_KEY, RESTART_KEY, crash_count, due_crashes, restart_count, victims
from dimster.coordinator.exporter import StatusExporter
from dimster.coordinator.faults import FaultRunner, check_faults, fault_steps
from dimster.coordinator.plans import RunPlan, SteadyPlan, plan_for
from dimster.coordinator.run_kafka import RunKafka
from dimster.coordinator.self_cost import SelfCost
from dimster.coordinator.topology import (
    Topology,
    build_topology,
    client_id,
    clients_of,
    least_loaded,
    place,
    pools,
    replace_clients,
    resize,
    worker_versions,
)
from dimster.coordinator.workers import WorkerLost, Workers
from dimster.errors import DimsterError
from dimster.kafka.groups import AssignmentWatch, GroupSpec, LagSample, LagWatch, drain
from dimster.results.bundle import ResultsBundle
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.protocol import (
    AddClients,
    Assignment,
    Close,
    Closed,
    CrashConsumers,
    Failed,
    Message,
    ProducersStopped,
    Ready,
    RemoveClients,
    Report,
    RestartConsumers,
    StartLoad,
    StopProducers,
    Update,
    WatchRedeliveries,
)
from dimster.workload.model import Workload, parse_workload, role_key
from dimster.workload.overrides import apply_overrides

FLUSH_EVERY = 5.0
EXPORT_EVERY = 1.0  # seconds between status snapshots for the metrics endpoint
STATUS_EVERY = 0.25  # seconds between status snapshots for the control API's `GET /status`
LOOP_TICK = 0.2
ASSIGNMENT_TIMEOUT = 120.0  # for every consumer to hold its assignment before load starts
READY_TIMEOUT = 120.0  # for every worker to build its clients
CLOCK_WARNING_SHARE = 0.1  # of the e2e p50 that clock uncertainty may reach before the run warns


class RunFailed(DimsterError):
    exit_code = 4


class CorrectnessFailed(RunFailed):
    """The run completed, and its records were not all delivered intact, in order, once."""

    exit_code = 7


@dataclass
class WorkerState:
    """What the coordinator knows of one worker, from its messages."""

    ready: bool = False
    producers_stopped: bool = False
    closed: bool = False
    lost: bool = False

    @property
    def gone(self) -> bool:
        return self.closed or self.lost


class Coordinator:
    def __init__(
        self,
        workload: Workload,
        cluster: ClusterBackend,
        bundle: ResultsBundle,
        workers: Workers,
        capacity: int,
        control: ControlServer | None = None,
        say=print,
        kafka: RunKafka | None = None,
        on_worker_loss: str = "fail",
        client_bootstrap: str | None = None,
        plan: RunPlan | None = None,
        context: dict | None = None,
        exporter: StatusExporter | None = None,
    ):
        self.workload = workload
        self.cluster = cluster
        self.bundle = bundle
        self.workers = workers
        self.control = control
        self._say = say
        self.on_worker_loss = on_worker_loss  # fail | continue
        self.plan = plan or plan_for(workload)
        self.context = context or {}  # shown in status: the campaign and point a run belongs to
        self.exporter = exporter  # the run's Prometheus endpoint, fed a status snapshot every second
        self._last_export = 0.0
        self._last_status = 0.0  # when the control API's status snapshot was last published
        self.run_id = uuid.uuid4().hex[:8]
        self.topology: Topology = build_topology(workload, self.run_id)
        bundle.redactor.names.update(self.topology.topics, self.topology.groups)
        # each worker's JVM runs one kafka-clients version: a run with several needs a worker per version
        self.java_versions = java_versions(workload, cluster.profile.kafka_version)
        wanted = max(len(self.topology.producers) + len(self.topology.consumers), len(set(self.java_versions.values())))
        self.worker_count = max(1, min(capacity, wanted))
        self.worker_versions = worker_versions(self.java_versions, self.worker_count, cluster.profile.kafka_version)
        self.pool_of = pools(self.java_versions, self.worker_versions)
        self.bootstrap = cluster.profile.bootstrap_servers
        self.client_bootstrap = client_bootstrap or self.bootstrap  # what workers' clients connect to
        self.client_security = cluster.client_security()  # the secure cluster's credentials, for every client
        bundle.redactor.learn({"clientSecurity": self.client_security})  # masked wherever they would show
        self.kafka = kafka or RunKafka(self.bootstrap, cluster.profile.kafka_version, self.client_security)
        self.aggregate = RunAggregate(self.topology.groups)
        self.states: list[WorkerState] = []
        self.placement: dict[str, int] = {}  # client id -> worker index
        self.phase = "starting"
        self.stop_requested = 0
        self.failure: str | None = None
        self.load_started = 0.0
        self.metrics: MetricsWriter | None = None
        self.last_window: dict = {}
        self.broker_watch: BrokerWatch | None = None  # once the cluster has said which brokers it has
        self.broker_scraper: BrokerScraper | None = None  # the brokers' own metrics, while load runs
        self.broker_samples: queue.Queue[tuple[float, int, list]] = queue.Queue()
        self.crashed = 0  # consumers crashed so far (crashConsumers, consumerCrashes)
        self.restarted = 0  # consumers restarted so far (restartConsumers)
        self.rebalances: dict[str, Counter] = {}  # consumer groups: rebalance callbacks per group and kind
        self.record_lock_ms = 30_000  # the share groups' lock duration at start (read from the broker)
        self.scheduled_crashes_fired = 0  # of consumerCrashes
        self.lag_watch: LagWatch | None = None  # the groups' lag as the brokers see it, while load runs
        self.broker_lag: LagSample | None = None  # its latest sample
        self._lag_error_said = False
        self.assignment_watches: list[AssignmentWatch] = []
        self.assignment_seconds: dict[str, float] = {}  # group -> seconds its consumers took to hold assignments
        # per group: records still there for it to consume, read once its consumers have closed
        self.unconsumed_by_group: dict[str, int] | None = None
        self.background: queue.Queue[tuple[str, dict]] = queue.Queue()  # events from helper threads
        self.fault_runner: FaultRunner | None = None  # the workload's scheduled faults, while load runs
        self._last_flush = 0.0
        self.self_cost = SelfCost()

    def say(self, line: str) -> None:
        """Print a line and keep it in console.log, secrets masked in both."""
        self._say(self.bundle.console(line))

    # ---- preparation ----------------------------------------------------------------------------
    def prepare_topics(self) -> int:
        """Create the run's topics; returns the broker's delivery-count limit for share groups."""
        limit = self.kafka.prepare(self.workload, self.topology.topics, list(self.topology.groups))
        self.broker_watch = self.kafka.broker_watch()
        self.bundle.run_info.update(topics=self.topology.topics, groups=self.topology.groups)
        self._note_group_config()
        return limit

    def _note_group_config(self) -> None:
        """Keep the groups' effective configs at start (every group of a run gets the same) in run.json."""
        if not self.topology.groups:
            return
        prefix = "share." if self.workload.consumer_type == "SHARE_GROUP" else "consumer."
        try:
            effective = self.kafka.group_config(next(iter(self.topology.groups)), prefix)
        except Exception as e:  # a note, not a failure: the run's numbers do not depend on it
            self.say(f"-- the groups' config could not be read at start: {e}")
            return
        self.bundle.run_info["groupConfig"] = {"start": effective}
        self.bundle.save_run_info()
        self.record_lock_ms = int(effective.get("share.record.lock.duration.ms") or self.record_lock_ms)

    def start_workers(self, delivery_count_limit: int) -> None:
        self.placement = place(self.topology, self.worker_count, self.pool_of)
        assignments = []
        for index in range(self.worker_count):
            producers, consumers = clients_of(self.topology, self.placement, index)
            assignments.append(
                Assignment(
                    worker_index=index,
                    bootstrap_servers=self.client_bootstrap,
                    # consumers join before load starts, paused or not: paused ones leave once it has
                    workload=self.workload.model_copy(update={"consumers_paused": False}).model_dump(by_alias=True),
                    producers=producers,
                    consumers=consumers,
                    total_producers=max(1, len(self.topology.producers)),
                    delivery_count_limit=delivery_count_limit,
                    log_file="",
                    kafka_version=self.cluster.profile.kafka_version,
                    java_clients_version=self.worker_versions[index],
                    record_lock_ms=self.record_lock_ms,
                    client_security=self.client_security,
                )
            )
        self.states = [WorkerState() for _ in assignments]
        self.workers.start(assignments)
        described = self.workers.describe()
        for where in described:
            index = where["index"]
            producers, consumers = clients_of(self.topology, self.placement, index)
            self.bundle.event(
                "worker_started",
                worker=index,
                **{k: v for k, v in where.items() if k not in ("index", "alive")},
                producers=len(producers),
                consumers=len(consumers),
            )
        self.bundle.run_info["workers"] = [{k: v for k, v in w.items() if k != "alive"} for w in described]
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
        watch = self.kafka.watch_assignments(groups, ASSIGNMENT_TIMEOUT)
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
        """Handle whatever the workers sent within `timeout`, and workers found lost."""
        for index, message in self.workers.receive(timeout):
            self._handle(index, message)

    def _phase_at(self, at: float) -> str:
        """The run's phase at epoch `at`, for a moment up to now: warm-up ends at its time, even before
        the loop has switched phases. A report's rows go under the phase its end time falls in (the
        summary leaves warm-up reports out, and one ending after warm-up holds measured records)."""
        if self.phase == "warmup" and at >= self.load_started + self.workload.warmup_seconds:
            return "measure"
        return self.phase

    def _handle(self, index: int, message: Message | WorkerLost) -> None:
        state = self.states[index]
        if isinstance(message, Report):
            if self.load_started:
                self.self_cost.report_handled(message.report.end_time)
            self.aggregate.add(message.report)
            self._note_crashes(message.report)
            self._note_rebalances(message.report)
            if self.exporter:
                self.exporter.add(message.report)
            if self.metrics:
                self.metrics.add(message.report, self._phase_at(message.report.end_time))
        elif isinstance(message, Ready):
            state.ready = True
        elif isinstance(message, ProducersStopped):
            state.producers_stopped = True
        elif isinstance(message, Closed):
            state.closed = True
        elif isinstance(message, Failed):
            self._fail(message.reason)
        elif isinstance(message, WorkerLost) and not state.gone:
            self._worker_lost(index, message)

    def _note_rebalances(self, report) -> None:
        """Consumer groups: every member's rebalance callbacks as events, counted per group (run.json)."""
        seen: dict[str, Counter] = {}
        for c in report.clients:
            for at, kind, partitions in c.rebalances:
                self.bundle.event(f"consumer_{kind}", client=c.client_id, group=c.group, at=at, partitions=partitions)
                seen.setdefault(c.group, Counter())[kind] += 1
        for group, counts in seen.items():
            self.rebalances.setdefault(group, Counter()).update(counts)
            told = ", ".join(f"{counts[kind]} {kind}" for kind in REBALANCE_KINDS if counts[kind])
            self.say(f"-- {group}: rebalance callbacks: {told}")

    def _note_crashes(self, report) -> None:
        """A crashed consumer reported what it held: the group's consumers watch for those records."""
        for c in report.clients:
            if not c.crashed_at:
                continue
            held = sum(last - first + 1 for ranges in c.crash_held.values() for first, last in ranges)
            self.bundle.event("consumer_crashed", client=c.client_id, group=c.group, at=c.crashed_at, held=held)
            self.say(f"-- consumer {c.client_id} crashed holding {held:,} record(s): back after their lock time-out")
            for index in self._live_workers():
                self._send(index, WatchRedeliveries(c.group, c.crashed_at, c.crash_held))

    def crash_consumers(self, count: int, by: str) -> dict:
        """Crash `count` share consumers now (see ConsumerClient.crash); recorded like a modification."""
        chosen = victims(self._live_consumers(), count, self.crashed)
        self.crashed += count
        self._send_to_hosts(chosen, CrashConsumers)
        entry = self.bundle.modification(
            key=CRASH_KEY, old=None, new=count, effect="crash", applied=time.time(), by=by, clients=chosen
        )
        plan = f", by the {by}" if by != "control" else ""
        self.say(f"-- crash {', '.join(chosen)}: they stop without acknowledging what they hold{plan}")
        return entry

    def restart_consumers(self, count: int, by: str) -> dict:
        """Restart `count` consumers now: each closes its Kafka client and starts a new one with the same
        client id (and group.instance.id, with staticMembership); recorded like a modification."""
        applied = time.time()  # before any consumer hears of it: its callbacks come after
        chosen = victims(self._live_consumers(), count, self.restarted)
        self.restarted += count
        self._send_to_hosts(chosen, RestartConsumers)
        entry = self.bundle.modification(
            key=RESTART_KEY, old=None, new=count, effect="restart", applied=applied, by=by, clients=chosen
        )
        static = " as static members" if self.workload.static_membership else ""
        self.say(f"-- restart {', '.join(chosen)}: they close and join their group again{static}")
        return entry

    def _live_consumers(self) -> list[str]:
        return [c for c in map(client_id, self.topology.consumers) if not self.states[self.placement[c]].gone]

    def _crash_when_due(self) -> None:
        """Scheduled crashes (consumerCrashes) whose time has come."""
        if not self.load_started or self.phase not in ("warmup", "measure"):
            return
        for index in due_crashes(self.workload, time.time() - self.load_started, self.scheduled_crashes_fired):
            self.scheduled_crashes_fired = index + 1
            count = min(self.workload.consumer_crashes[index].consumers, len(self._live_consumers()))
            if count and not self.workload.consumers_paused:
                self.crash_consumers(count, by="schedule")

    def _send(self, worker_index: int, message: Message) -> None:
        if not self.states[worker_index].gone:
            self.workers.send(worker_index, message)

    def _send_to_hosts(self, client_ids: list[str], message: Callable[[list[str]], Message]) -> None:
        """Send each worker `message` of the clients of `client_ids` it hosts."""
        by_worker: dict[int, list[str]] = {}
        for one in client_ids:
            by_worker.setdefault(self.placement[one], []).append(one)
        for index, hosted in by_worker.items():
            self._send(index, message(hosted))

    def _live_workers(self) -> list[int]:
        return [i for i, state in enumerate(self.states) if not state.gone]

    def _worker_lost(self, index: int, lost: WorkerLost) -> None:
        """A worker is gone. By onWorkerLoss: fail the run (keeping what was measured), or give its
        clients to the live workers under fresh ids and go on."""
        reason = lost.reason
        self.states[index].lost = True
        lost_clients = sorted(c for c, w in self.placement.items() if w == index)
        self.aggregate.lost_producers.update(int(c[1:]) for c in lost_clients if c.startswith("p"))
        self.aggregate.consumers_lost([c for c in lost_clients if c.startswith("c")], lost.last_heard)
        self.bundle.event("worker_lost", worker=index, reason=reason, clients=lost_clients)
        if self.on_worker_loss != "continue" or not self._live_workers() or self.phase in ("closing", "done"):
            self._fail(f"{reason} (onWorkerLoss: {self.on_worker_loss})")
            return
        for c in lost_clients:
            del self.placement[c]
        if self.phase == "drain":  # producers have stopped: only consumers need a new home
            lost_clients = [c for c in lost_clients if c.startswith("c")]
            gone_producers = {p for p in self.topology.producers if self.placement.get(client_id(p)) is None}
            self.topology.producers = [p for p in self.topology.producers if p not in gone_producers]
        producers, consumers = replace_clients(self.topology, lost_clients)
        moved = self._add_clients(producers, consumers)
        self.bundle.event("clients_replaced", worker=index, lost=lost_clients, new=moved)
        self.say(
            f"-- {reason}: its {len(lost_clients)} client(s) {', '.join(lost_clients) or '-'} go on as "
            f"{', '.join(f'{c} on worker {w}' for c, w in moved.items()) or 'nothing'}"
        )

    def _add_clients(self, producers: list, consumers: list) -> dict[str, int]:
        """Place new clients on the least loaded live workers and start them there; returns where
        each went, by client id. Adding consumers starts a watch on their assignments."""
        live = self._live_workers()
        plan: dict[int, AddClients] = {}
        homeless: dict[str, str] = {}  # client id -> the kafka-clients version no live worker runs
        for spec in [*producers, *consumers]:
            allowed = self.pool_of(spec)
            pool = [w for w in live if w in allowed]
            if not pool:
                homeless[client_id(spec)] = self.worker_versions[allowed[0]]
                continue
            target = least_loaded(self.placement, pool, spec)
            self.placement[client_id(spec)] = target
            add = plan.setdefault(target, AddClients([], []))
            (add.producers if spec in producers else add.consumers).append(spec)
        if homeless:  # out of the run, so that nothing looks for them on a worker
            self.topology.producers = [p for p in self.topology.producers if client_id(p) not in homeless]
            self.topology.consumers = [c for c in self.topology.consumers if client_id(c) not in homeless]
            versions = ", ".join(sorted(set(homeless.values())))
            self._fail(f"no live worker runs kafka-clients {versions} for {', '.join(homeless)}")
        for target, add in plan.items():
            self._send(target, add)
        if any(add.consumers for add in plan.values()) and not self.workload.consumers_paused:
            self._watch_assignments()  # paused consumers join when they resume
        return {
            client_id(spec): self.placement[client_id(spec)]
            for spec in [*producers, *consumers]
            if client_id(spec) not in homeless
        }

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
            if time.time() - self._last_status >= STATUS_EVERY:
                self._publish_status()
        while self.broker_watch:
            try:
                change, broker = self.broker_watch.changes.get_nowait()
            except queue.Empty:
                break
            self.bundle.event(f"broker_{change}", broker=broker)
            self.say(f"-- broker {broker} {'left the cluster' if change == 'left' else 'is back'}")
        self._record_background()
        self._note_assignments()
        self._write_broker_samples()
        self._take_lag()
        self._crash_when_due()
        if self.exporter and time.time() - self._last_export >= EXPORT_EVERY:
            self.exporter.update(self.status())
            self._last_export = time.time()
        if self.metrics and time.time() - self._last_flush >= FLUSH_EVERY:
            self.metrics.flush()
            self._last_flush = time.time()

    def _prepare_broker_scraper(self) -> None:
        urls = self.cluster.profile.broker_metrics_urls
        if not urls:
            return
        self.broker_scraper = BrokerScraper(
            urls,
            deliver=lambda at, broker, samples: self.broker_samples.put((at, broker, samples)),
            note=lambda message: self.background.put(("broker_metrics", {"message": message})),
        )
        self.broker_scraper.warm_up()

    def _write_broker_samples(self) -> None:
        while self.metrics:
            try:
                at, broker, samples = self.broker_samples.get_nowait()
            except queue.Empty:
                break
            self.metrics.add_broker_samples(at, broker, samples, self.phase)

    def _start_lag_watch(self) -> None:
        """Read the groups' lag from the brokers, over their partitions now (again after they grew)."""
        if self.lag_watch:
            self.lag_watch.stop()
            self._take_lag()  # its last readings
        self.lag_watch = self.kafka.watch_lag(self._group_specs(), LAG_EVERY)

    def _take_lag(self) -> None:
        """The groups' positions as the brokers see them, beside dimster's own backlog."""
        if self.lag_watch is None:
            return
        if not self.load_started:  # the groups are still forming: nothing to say of their lag yet
            self.lag_watch.take()
            drain(self.lag_watch.errors)
            return
        for sample in self.lag_watch.take():
            self.broker_lag = sample
            if self.metrics:
                self.metrics.add_group_lag(sample, self.aggregate.backlog_by_group(), self.phase)
        for error in drain(self.lag_watch.errors):
            if not self._lag_error_said:  # once: a cluster that does not answer says so elsewhere too
                self._lag_error_said = True
                self.bundle.event("broker_lag_unknown", reason=error)
                self.say(f"-- the groups' lag could not be read from the brokers: {error}")

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
            if self.fault_runner and not self.fault_runner.done():  # ended by an exception: heal all the same
                self.fault_runner.finish()
                self.fault_runner.thread.join(self._heal_timeout())
                self._record_background()
            if self.broker_watch:
                self.broker_watch.stop()
            if self.broker_scraper:
                self.broker_scraper.stopped.set()
            for watch in self.assignment_watches:
                watch.stop()
            if self.lag_watch:
                self.lag_watch.stop()
            if self.phase != "done":  # ended by an exception: no worker may outlive the run
                self._close_workers_quietly()
            for s, handler in handlers.items():
                signal.signal(s, handler)

    def _close_workers_quietly(self) -> None:
        try:
            for killed in self.workers.close():
                self.bundle.event("worker_killed", worker=killed)
        except Exception as e:  # already failing: keep the first error, note this one
            self.bundle.event("workers_not_closed", reason=f"{type(e).__name__}: {e}")

    def _run(self) -> int:
        w = self.workload
        delivery_count_limit = self.prepare_topics()
        self.bundle.event("topics_created", topics=self.topology.topics, groups=list(self.topology.groups))
        # Started now, not as load starts, where their start-up cost would slow the first seconds:
        # the lag watch's JVM and the brokers' first metrics answer.
        if self.topology.groups:
            self._start_lag_watch()
        self._prepare_broker_scraper()
        self.start_workers(delivery_count_limit)
        self.say(
            f"run {self.run_id}: {len(self.topology.producers)} producer(s), {len(self.topology.consumers)} "
            f"consumer(s) on {self.worker_count} worker(s); results in {self.bundle.path}"
        )
        if not self._wait(lambda: all(x.ready or x.gone for x in self.states), READY_TIMEOUT, 1e9):
            self._fail(self.failure or f"workers did not get ready within {READY_TIMEOUT:.0f}s")
        if not self.failure:
            self._await_assignments()
        self.load_started = time.time() + LOOP_TICK
        self.metrics = MetricsWriter(self.bundle.path / "metrics", self.load_started)
        self._last_flush = time.time()
        for index in self._live_workers():
            self._send(index, StartLoad(self.load_started))
            if w.consumers_paused:
                self._send(index, Update(w.model_dump(by_alias=True), max(1, len(self.topology.producers))))
        self.aggregate.load_started = self.load_started
        self.aggregate.probing = getattr(self.plan, "probes", False)
        self.aggregate.restart_pacing_window()  # reports from before load start say nothing of pacing
        self.aggregate.take_window()  # the first status line covers load only
        self.broker_watch.start()
        self._schedule_faults()
        if self.broker_scraper:
            self.broker_scraper.start()
        self.self_cost.start()
        self.bundle.event("load_started", warmup_seconds=w.warmup_seconds, duration_seconds=w.duration_seconds)
        self.phase = "warmup" if w.warmup_seconds else "measure"
        if self.control:
            self._publish_status()  # `--detach` returns now: a status asked from then on shows load
            self.control.update(phase="running")
        next_line = self.load_started + w.report_interval_seconds
        while not self.failure and not self.stop_requested and not self._plan_step():
            self._receive(LOOP_TICK)
            self._tick()
            if self.phase == "warmup" and self._phase_at(time.time()) == "measure":
                self.phase = "measure"
                self.bundle.event("measure_started")
            if time.time() >= next_line:
                self._print_line()
                self.self_cost.line_printed(next_line)
                next_line = max(next_line + self.workload.report_interval_seconds, time.time() + 0.5)
        return self._stop()

    def _plan_end(self) -> str:
        return "duration" if isinstance(self.plan, SteadyPlan) else f"{self.plan.name} plan"

    def _plan_step(self) -> bool:
        """Ask the plan what to do now; apply its changes. True when the load phase is over."""
        step = self.plan.step(time.time() - self.load_started, self.workload, self.aggregate)
        if step.evidence:
            self.bundle.event("plan_evidence", **step.evidence)
        if step.note:
            self.bundle.event("plan", plan=self.plan.name, note=step.note)
            self.say(f"-- {self.plan.name}: {step.note}")
        if step.sets:
            try:
                self.modify(step.sets, by=self.plan.name)
            except DimsterError as e:
                self._fail(f"{self.plan.name} plan: {e}")
            self._publish_status()  # a status asked for from now on shows the change
        return step.done

    def _stop(self) -> int:
        forced = self.stop_requested > 1
        self.self_cost.stop()
        self.bundle.event("stopping", reason=self.failure or ("request" if self.stop_requested else self._plan_end()))
        self.phase = "drain"
        if self.control:
            self.control.update(phase="stopping")
        if self.fault_runner:
            self.fault_runner.finish()  # heals what is still broken, while the run drains
        every = self.workload.report_interval_seconds
        for index in self._live_workers():
            self._send(index, StopProducers())
        self._wait(lambda: all(x.producers_stopped or x.gone for x in self.states), 90, every)
        if self.workload.consumers_paused:
            self.bundle.event("drain_skipped", reason="consumers are paused", backlog=self.aggregate.backlog)
        elif not self.failure and not forced:
            self.bundle.event("drain_started", backlog=self.aggregate.backlog)
            drained = self._wait(lambda: self.aggregate.backlog == 0, self.workload.drain_timeout_seconds, every)
            self.bundle.event("drain_ended", drained=drained, backlog=self.aggregate.backlog)
        self._await_heals()
        self.phase = "closing"
        for index in self._live_workers():
            self._send(index, Close())
        self._wait(lambda: all(x.gone for x in self.states), 5 if forced else 90, 1e9)
        for killed in self.workers.close():
            self.bundle.event("worker_killed", worker=killed)
        self.phase = "done"
        if self.broker_scraper:
            self.broker_scraper.stop()  # and a last scrape: the brokers' counts at the end
            self._write_broker_samples()
        self._read_unconsumed()
        if self.lag_watch:
            self.lag_watch.stop()
            self._take_lag()  # with the reading of the end
        if self.metrics:
            self.metrics.flush()
        self._publish_status()  # the last one: `lost` is known now
        if not self.workload.keep_topics:
            for problem in self.kafka.delete_topics(self.topology.topics):
                self.say(problem)
        return self._finish(forced)

    def _read_unconsumed(self) -> None:
        """Where each group stands now that its consumers have closed: records it could still consume
        (a drain that timed out, a forced stop) are unconsumed, not lost. The lag watch, which runs
        whenever the run has groups, reads them."""
        if self.lag_watch is None:
            self.unconsumed_by_group = {}
            return
        try:
            self.unconsumed_by_group = self._unconsumed_now()
            # a share partition's state reaches the share coordinator moments, at times seconds, after
            # the last acknowledgements: look again each second for a while before calling the account open
            deadline = time.monotonic() + POSITIONS_SETTLE_SECONDS
            while not self._accounts_close() and time.monotonic() < deadline:
                time.sleep(POSITIONS_LOOK_AGAIN_SECONDS)
                self.unconsumed_by_group = self._unconsumed_now()
        except DimsterError as e:
            self.bundle.event("group_positions_unknown", reason=str(e))
            self.say(f"-- {e}: 'lost' counts every record not consumed")

    def _accounts_close(self) -> bool:
        return all(g["closes"] for g in self.aggregate.account(self.unconsumed_by_group).values())

    def _unconsumed_now(self) -> dict[str, int]:
        reading = self.lag_watch.read_now(POSITIONS_TIMEOUT_SECONDS)
        return {group: reading.lag(group) for group in self.topology.groups}

    def _clock_offsets(self) -> dict[str, dict]:
        """Each remote worker's clock offset (the e2e latencies are corrected by it) and its
        uncertainty; warns when that uncertainty is a large share of the measured e2e p50."""
        offsets = {str(i): record for i, record in self.workers.clock_offsets().items()}
        p50 = self.aggregate.e2e_measured.percentile(50)
        worst = max((r["uncertainty_ms"] or 0.0 for r in offsets.values()), default=0.0)
        if p50 and worst > CLOCK_WARNING_SHARE * p50 / 1000:
            message = (
                f"clock offsets between hosts are known to ±{worst:.1f} ms, {worst / (p50 / 1000):.0%} of the "
                f"e2e p50 ({p50 / 1000:.1f} ms): cross-host e2e latencies are that uncertain"
            )
            self.bundle.event("clock_uncertainty_high", uncertainty_ms=worst, e2e_p50_ms=p50 / 1000, message=message)
            self.say(f"-- {message}")
        return offsets

    @property
    def unconsumed(self) -> int | None:
        return None if self.unconsumed_by_group is None else sum(self.unconsumed_by_group.values())

    def _finish(self, forced: bool) -> int:
        account = self.aggregate.account(self.unconsumed_by_group)
        totals = run_totals(self.aggregate, self.unconsumed_by_group, account)
        mode = self.plan.result() or {"type": self.workload.mode.type}
        if mode["type"] == "correctness":
            totals.update(corrupt=self.aggregate.corrupt, out_of_order=self.aggregate.out_of_order)
            mode = correctness_verdict(self.workload.mode, totals, self.workload.consumer_type)
        status = "failed" if self.failure else ("forced" if forced else "completed")
        self.bundle.run_info.update(
            {
                "status": status,
                "failure": self.failure,
                "totals": totals,
                "account": account,
                "ended": time.time(),
                "load_started": self.load_started,
                "topics": self.topology.topics,
                "groups": self.topology.groups,
                "consumer_assignment_seconds": self.assignment_seconds,
                "rebalances": {group: dict(counts) for group, counts in self.rebalances.items()},
                "clock_offsets": self._clock_offsets(),
                "e2e_ms": self.aggregate.e2e_measured.summary_ms(),  # the summary has more
                "coordinator": self.self_cost.as_record(),
                "final_workload": self.workload.to_yaml_dict(),
                "mode": mode,
            }
        )
        self.bundle.save_run_info()
        if self.exporter:  # the final numbers (lost and unconsumed are known now)
            self.exporter.update(self.status())
        self.bundle.event("run_ended", status=status, **totals)
        self._say_account(account)
        self.say(ended_line(status, totals, self.bundle.path))
        if mode.get("verdict"):
            self.say(f"{self.plan.name}: {mode['verdict']}")
        if self.failure:
            raise RunFailed(f"run failed: {self.failure} (results kept in {self.bundle.path})")
        if mode["type"] == "correctness":
            return self._correctness_outcome(mode)
        return 0

    def _say_account(self, account: dict[str, dict]) -> None:
        for group, terms in account.items():
            if not terms["closes"]:
                self.bundle.event("account_open", group=group, **terms)
                why = why_open(terms, self.aggregate.lock_timeouts, self.aggregate.crashes)
                self.say(f"-- the account of group {group} does not close: {why}")

    def _correctness_outcome(self, verdict: dict) -> int:
        checked = "loss, corruption, order, duplicates" if verdict["order_checked"] else "loss, corruption, duplicates"
        if verdict["passed"]:
            self.say(f"correctness passed ({checked})")
            return 0
        self.bundle.event("correctness_failed", reasons=verdict["reasons"])
        raise CorrectnessFailed(
            f"correctness failed: {', '.join(verdict['reasons'])} (results kept in {self.bundle.path})"
        )

    # ---- the control API ----------------------------------------------------------------------------
    def _publish_status(self) -> None:
        """A fresh status for the control API's HTTP threads to answer `GET /status` with."""
        if self.control:
            self.control.publish_status(self.status())
            self._last_status = time.time()

    def _serve(self, request: ControlRequest) -> None:
        """One request from the control API's queue: a change, answered once a fresh status snapshot is
        published (so the caller's next `GET /status` shows it), or a status asked before the first one."""
        try:
            answer, code = self._answer(request), 200
        except DimsterError as e:
            answer, code = {"error": str(e)}, 400
        except Exception as e:  # never leave a caller hanging; the run goes on
            answer, code = {"error": f"internal error: {type(e).__name__}: {e}"}, 500
        try:
            if request.action != "status":
                self._publish_status()
        finally:
            request.reply(answer, code)

    def _answer(self, request: ControlRequest) -> dict:
        if request.action == "modify":
            return self.modify(request.body["sets"])
        if request.action == "stop":
            self.stop_requested = max(self.stop_requested, 1)
            self.say("stop requested through the control API: producers stop, consumers drain")
            return {"stopping": True, "results": str(self.bundle.path)}
        if request.action == "event":
            details = {k: v for k, v in request.body.items() if k != "event"}
            self.bundle.event(request.body["event"], **details)
            self.say(f"-- {request.body.get('message') or request.body['event']}")
            return {"recorded": True}
        return self.status()

    def status(self) -> dict:
        window = self.last_window or {}
        return {
            "environment": self.cluster.profile.name,
            "runId": self.run_id,
            "results": str(self.bundle.path),
            "metricsUrl": self.exporter.url if self.exporter else None,
            "phase": self.phase,
            "elapsedSeconds": round(time.time() - self.load_started, 1) if self.load_started else 0.0,
            **self.aggregate.recent_rates(5.0),
            "sent": self.aggregate.sent,
            "acked": self.aggregate.acked,
            "received": self.aggregate.received,
            "backlog": self.aggregate.backlog,
            "duplicates": self.aggregate.duplicates,
            "sendErrors": self.aggregate.send_errors,
            "brokerLag": sum(self.broker_lag.lag(g) for g in self.topology.groups) if self.broker_lag else None,
            "brokerLagAtSeconds": round(self.broker_lag.at - self.load_started, 1) if self.broker_lag else None,
            "lockRenewals": self.aggregate.renewed,
            "lockTimeouts": self.aggregate.lock_timeouts,
            # known once the consumers have closed at the end of the run
            "lost": self.aggregate.lost(self.unconsumed_by_group) if self.unconsumed_by_group is not None else None,
            "unconsumed": self.unconsumed,
            "e2eP50Ms": window.get("e2eP50Ms"),
            "e2eP99Ms": window.get("e2eP99Ms"),
            "publishP99Ms": window.get("publishP99Ms"),
            "recordsPerPoll": window.get("recordsPerPoll"),
            "maxPollRecords": window.get("maxPollRecords"),
            "workerWaitShare": window.get("workerWaitShare"),
            **self.aggregate.producer_batches(),
            "producers": len(self.topology.producers),
            "consumers": len(self.topology.consumers),
            "brokers": sorted(self.broker_watch.registered) if self.broker_watch else [],
            "workers": [{**w, "alive": not self.states[w["index"]].gone} for w in self.workers.describe()],
            "mode": self.workload.mode.type,
            "consumersPaused": self.workload.consumers_paused,
            **self.context,
            "settings": self.workload.to_yaml_dict(),
        }

    def modify(self, pairs: list[tuple[str, str]], by: str = "control") -> dict:
        """Validate the whole set, then apply it. Nothing changes when any part is invalid. `by`:
        who asked (the control API, or the run's plan), recorded with each change."""
        if self.phase not in ("warmup", "measure"):
            raise DimsterError(f"the run is {self.phase}: modifications apply only while load runs")
        crashes = [text for key, text in pairs if key == CRASH_KEY]
        restarts = [text for key, text in pairs if key == RESTART_KEY]
        pairs = [(key, text) for key, text in pairs if key not in (CRASH_KEY, RESTART_KEY)]
        old = self.workload
        new = parse_workload(apply_overrides(old.to_yaml_dict(), pairs), "--set")
        if (crashes or restarts) and new.consumers_per_group != old.consumers_per_group:
            raise DimsterError(f"--set: {CRASH_KEY} and {RESTART_KEY} go in a --set without consumersPerGroup")
        consumers = len(self._live_consumers())
        crash = sum(crash_count(text, new, consumers) for text in crashes)
        restart = sum(restart_count(text, new, consumers) for text in restarts)
        if max(crash, restart) > consumers:
            raise DimsterError(f"--set: {max(crash, restart)} consumers at once, of the run's {consumers}")
        check_client_configs(new, "--set", self.cluster.profile.kafka_version)
        try:
            changes = live_changes(old.to_yaml_dict(), new.to_yaml_dict())
        except ValueError as e:
            raise DimsterError(f"--set: {e}") from None
        self._check_java_versions(new)
        if not changes and not crash and not restart:
            return {"applied": [], "notes": ["nothing changed"]}
        effects = {c.effect for c in changes}
        config_changes = None
        if effects & {"topic-config", "partitions", "group-config"}:
            groups = list(self.topology.groups)
            config_changes = self.kafka.config_changes(old, new, self.topology.topics, effects, groups)
            config_changes.validate()  # on the broker first: all or nothing
        if "faults" in effects:
            check_faults(new, self.cluster.profile)
        broker_cluster = self._broker_cluster(new) if "broker" in effects else None
        if broker_cluster is not None:
            broker_cluster.check_broker_config()

        applied_at = time.time()
        notes = config_changes.apply() if config_changes else []
        self.workload = new
        if "client-count" in effects:
            self._resize_clients(new)
        if effects & {"rate", "client-count"}:
            self.aggregate.restart_pacing_window()
        resumed = "pause" in effects and not new.consumers_paused
        for index in self._live_workers():
            self._send(index, Update(new.model_dump(by_alias=True), max(1, len(self.topology.producers))))
        if resumed:  # the consumers rejoin their groups: the timeline shows when they hold assignments
            self._watch_assignments()
        if "partitions" in effects and self.lag_watch:
            self._start_lag_watch()
        if "faults" in effects:
            notes.append(f"faults: {self._schedule_faults()} step(s) to come (steps whose time has passed are dropped)")
        if broker_cluster is not None:
            notes.append("broker config: redeploying in the background (watch the console and events)")
            threading.Thread(target=self._redeploy, args=(broker_cluster,), daemon=True).start()
        applied = [self._record(change, applied_at, by) for change in changes]
        if crash:
            applied.append(self.crash_consumers(crash, by))
        if restart:
            applied.append(self.restart_consumers(restart, by))
        return {"applied": applied, "notes": notes}

    def _heal_timeout(self) -> float:
        """Each owed heal may wait for a node to start (startTimeoutSeconds), one after the other."""
        return self.cluster.profile.start_timeout_seconds * (len(self.fault_runner.unhealed) + 1)

    def _await_heals(self) -> None:
        """Until the faults schedule has healed what is still broken, whatever ended the load (a
        failure or a forced stop too: no node may stay paused or stopped because a run ended)."""
        if self.fault_runner is None:
            return
        self.fault_runner.finish()  # if the drain's start has not already
        deadline = time.time() + self._heal_timeout()
        while not self.fault_runner.done() and time.time() < deadline:
            self._receive(LOOP_TICK)
            self._tick()
        if not self.fault_runner.done():
            self.bundle.event("faults_not_healed", message=f"faults not healed within {self._heal_timeout():.0f} s")
        self._record_background()

    def _record_background(self) -> None:
        """The helper threads' events still queued, into the bundle and onto the console."""
        while True:
            try:
                kind, details = self.background.get_nowait()
            except queue.Empty:
                return
            self.bundle.event(kind, **details)
            self.say(f"-- {details.get('message', kind)}")

    def _schedule_faults(self) -> int:
        """Start the workload's faults schedule, or replace the steps still to come; how many there are."""
        steps = fault_steps(self.workload)
        if self.fault_runner is not None:
            return self.fault_runner.reschedule(steps)
        if not steps:
            return 0
        self.fault_runner = FaultRunner(self.cluster, steps, self.load_started, self.background)
        self.fault_runner.start()
        return len(self.fault_runner.pending)

    def _record(self, change: Change, applied_at: float, by: str) -> dict:
        entry = self.bundle.modification(
            key=change.key, old=change.old, new=change.new, effect=change.effect, applied=applied_at, by=by
        )
        plan = f", by the {by} plan" if by != "control" else ""
        self.say(f"-- set {change.key}: {change.old} -> {change.new} ({change.effect}{plan})")
        return entry

    def _check_java_versions(self, new: Workload) -> None:
        """A role switched to Java clients live runs them in the workers' JVMs: their version must be its own."""
        for role, version in java_versions(new, self.cluster.profile.kafka_version).items():
            if role not in self.java_versions and set(self.worker_versions) != {version}:
                raise DimsterError(
                    f"--set clientLibrary.{role_key(role)}: its Java clients would run kafka-clients {version}, "
                    f"but the workers' JVMs run {', '.join(sorted(set(self.worker_versions)))} "
                    "(a JVM holds one version, chosen when the run starts): start a new run"
                )

    def _resize_clients(self, new: Workload) -> None:
        added_producers, added_consumers, removed = resize(
            self.topology, new.producers_per_topic, new.consumers_per_group, new.consumer_type
        )
        self._send_to_hosts(removed, RemoveClients)
        for gone in removed:
            del self.placement[gone]
        self._add_clients(added_producers, added_consumers)

    def _broker_cluster(self, new: Workload) -> ClusterBackend:
        return backend_for(self.cluster.profile.with_broker_config(new.broker_config))

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


POSITIONS_SETTLE_SECONDS = 10.0  # how long the groups' positions may take to agree with the acknowledgements
POSITIONS_LOOK_AGAIN_SECONDS = 1.0
POSITIONS_TIMEOUT_SECONDS = 90.0  # for the groups' positions at the end
LAG_EVERY = 5.0  # seconds between readings of the groups' lag from the brokers
