"""The coordinator: one per running workload, and the one thread that changes the run. It goes through
the run's phases (prepare, start, load, stop and drain, close, account) and, every loop pass, hands
the workers' messages, control requests and helper threads' events to the part that owns them:
placement (`ensemble`), the start barrier (`barrier`), live changes (`live`), the brokers' own view
(`observers`), the end account (`account`) and the status (`status`); `run_log` writes it all down."""

import time
import uuid
from collections.abc import Callable

from dimster.clients.properties import java_versions
from dimster.clock import Deadline
from dimster.cluster.backend import ClusterBackend
from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.end import clock_offsets, close_account, record_end, record_failure
from dimster.coordinator.account.intake import ReportIntake, note_replaced, note_unclosed, note_worker_lost
from dimster.coordinator.account.journal import RunJournal
from dimster.coordinator.control.api import ControlServer
from dimster.coordinator.control.console import status_line
from dimster.coordinator.control.desk import ControlDesk
from dimster.coordinator.control.exporter import StatusExporter
from dimster.coordinator.control.run_log import RunLog
from dimster.coordinator.live.apply import LiveChanges
from dimster.coordinator.loop.barrier import ASSIGNMENT_TIMEOUT, AssignmentBarrier, group_specs
from dimster.coordinator.loop.drain import DrainWatch
from dimster.coordinator.loop.failures import CorrectnessFailed, RunFailed, run_guards
from dimster.coordinator.loop.generator_watch import GeneratorWatch, window_phase
from dimster.coordinator.loop.limit_watch import LimitWatch
from dimster.coordinator.loop.phases import RunPhases
from dimster.coordinator.loop.start import assignment_for, prepare_topics, record_workers
from dimster.coordinator.loop.status import run_status
from dimster.coordinator.observers.brokers import BrokerObservers
from dimster.coordinator.observers.run_kafka import RunKafka
from dimster.coordinator.workers.ensemble import Ensemble, Placed
from dimster.coordinator.workers.seam import WorkerLost, Workers
from dimster.coordinator.workers.topology import Topology, build_topology
from dimster.errors import DimsterError
from dimster.results.bundle import ResultsBundle
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.protocol import REPORT_EVERY, Close, Failed, Message, StartLoad, StopProducers, Update
from dimster.workload.model import Workload
from dimster.workload.modes import plan_for
from dimster.workload.modes.base import RunPlan, SteadyPlan, planned_seconds

LOOP_TICK = 0.2
READY_TIMEOUT = 120.0  # for every worker to build its clients
CLOSE_TIMEOUT = 90.0  # for every worker to send its last report and close


class Coordinator:
    def __init__(
        self,
        workload: Workload,
        cluster: ClusterBackend,
        bundle: ResultsBundle,
        workers: Workers,
        capacity: int,
        control: ControlServer | None = None,
        say: Callable[[str], None] = print,
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
        self.on_worker_loss = on_worker_loss  # fail | continue
        self.plan = plan or plan_for(workload)
        self.context = context or {}  # shown in status: the campaign and point a run belongs to
        self.exporter = exporter  # the run's Prometheus endpoint, fed a status snapshot every second
        self.run_id = bundle.path.name  # the run's id everywhere: its results folder's name
        self.run_tag = uuid.uuid4().hex[:8]  # in its topics' and groups' names, so no two runs share one
        self.topology: Topology = build_topology(workload, self.run_tag)
        bundle.redactor.add_names([*self.topology.topics, *self.topology.groups])
        self.log = RunLog(bundle, say)
        self.desk = ControlDesk(control, self.status, self.log)
        profile = cluster.profile
        versions = java_versions(workload, profile.kafka_version)
        self.ensemble = Ensemble(workers, self.topology, capacity, versions, profile.kafka_version)
        self.client_bootstrap = client_bootstrap or profile.bootstrap_servers  # what workers' clients connect to
        self.client_security = cluster.client_security()  # the secure cluster's credentials, for every client
        bundle.redactor.learn({"clientSecurity": self.client_security})  # masked wherever they would show
        self.kafka = kafka or RunKafka(profile.bootstrap_servers, profile.kafka_version, self.client_security)
        self.aggregate = RunAggregate(self.topology.groups)
        self.barrier = AssignmentBarrier(self.kafka, self.log)
        self.observers = BrokerObservers(self.kafka, profile.broker_metrics_urls, self.log, self.aggregate)
        self.live = LiveChanges(cluster, self.kafka, self.ensemble, self.log, versions)
        self.limits = LimitWatch(self)  # why a share group falls behind, after each console window
        self.generator = GeneratorWatch(self.log, bundle)  # whether dimster kept its clients' schedule
        self.phases = RunPhases()  # starting until load starts
        self.stop_requested = 0
        self.failure: str | None = None
        self.load_started = 0.0
        self.metrics: MetricsWriter | None = None
        self.last_window: dict = {}
        self.unconsumed_by_group: dict[str, int] | None = None  # per group, read once its consumers closed
        self.journal = RunJournal(bundle.path)  # every report as it arrives: a killed run loses nothing
        thresholds = [(t.threshold, t.abort_on_fail) for t in workload.thresholds]
        self.intake = ReportIntake(self.aggregate, self.ensemble, self.log, exporter, self.journal, thresholds)
        self.aborted_by: str | None = None  # the abortOnFail threshold that stopped the run early

    def _groups(self) -> dict:
        return group_specs(self.topology, self.workload.consumer_type, self.workload.partitions_per_topic)

    # ---- before load --------------------------------------------------------------------------------
    def prepare(self) -> None:
        """The run's topics, the brokers' watches, and its workers with their clients."""
        limits = prepare_topics(self.kafka, self.workload, self.topology, self.bundle, self.log)
        self.intake.fold_outcomes(lock_ms=limits[1])
        self.observers.watch_brokers()
        self.log.event("topics_created", topics=self.topology.topics, groups=list(self.topology.groups))
        self.observers.warm_up(self._groups() if self.topology.groups else {})
        self.journal.start(self.topology.topics, self.workload.partitions_per_topic, self._groups())
        version = self.cluster.profile.kafka_version
        assignment = assignment_for(
            self.workload, self.topology, self.ensemble, self.client_bootstrap, version, self.client_security, limits
        )
        record_workers(self.ensemble.start(assignment), self.ensemble, self.bundle)

    # ---- messages -----------------------------------------------------------------------------------
    def _receive(self, timeout: float) -> None:
        """Handle what the workers sent within `timeout` and workers found lost (ReportIntake.taken)."""
        received = self.ensemble.workers.receive(timeout, self.desk.doorbell)
        for index, message in self.intake.taken(received, self.metrics, self.phases.of_report, self.load_started > 0):
            self._handle(index, message)

    @property
    def phase(self) -> str:
        return self.phases.now

    def _handle(self, index: int, message: Message | WorkerLost) -> None:
        if isinstance(message, Failed):
            self._fail(message.reason)
        elif isinstance(message, WorkerLost):
            if not self.ensemble.is_gone(index):
                self._worker_lost(index, message)
        else:
            self.ensemble.note(index, message)

    def _worker_lost(self, index: int, lost: WorkerLost) -> None:
        """A worker is gone: the run fails, or its clients go on elsewhere (onWorkerLoss)."""
        loss = self.ensemble.lose(index, lost, self.phase, self.on_worker_loss)
        note_worker_lost(index, lost, loss, self.aggregate, self.log, self.journal)
        if loss.failure:
            self._fail(loss.failure)
            return
        self._placed(loss.placed)
        note_replaced(index, lost, loss, self.log)

    def _placed(self, placed: Placed) -> None:
        if placed.failure:
            self._fail(placed.failure)
        if placed.consumers_added and not self.workload.consumers_paused:
            self.barrier.watch(self._groups())  # paused consumers join when they resume

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
            self.log.tell("run_failed", f"!! {reason}: stopping the run, keeping what was measured", reason=reason)

    def _on_signal(self, signum, _frame) -> None:
        self.stop_requested += 1
        forcing = self.stop_requested > 1
        self.log.say("forcing stop" if forcing else "stopping: producers stop, consumers drain (Ctrl-C again to force)")

    # ---- the loop -------------------------------------------------------------------------------------
    def _tick(self) -> None:
        """Work every loop pass does besides receiving: control requests, the helpers' events, flushing."""
        self.desk.serve(self.modify, self._stop_asked)
        self.observers.take(self.metrics, self.phases.at, self.aggregate.backlog_by_group)
        self.log.write_background()
        self.barrier.note(live=self.load_started > 0)
        if self.load_started and self.phase in ("warmup", "measure"):
            self.live.crash_when_due(self.workload, time.time() - self.load_started)
        self.intake.pass_on(self.metrics, self.status)

    def _wait(self, condition: Callable[[], bool], timeout: float, report_every: float, stoppable: bool = True) -> bool:
        """Go round the loop until `condition` holds or `timeout` passes; a status line every
        `report_every` seconds. A `stoppable` wait ends early on a forced stop or a failure."""
        deadline, next_line = Deadline(timeout), time.time() + report_every
        while not condition():
            stopped = self.stop_requested > 1 or (self.failure and self.phase != "closing")
            if deadline.passed() or (stoppable and stopped):
                return condition()
            self._receive(LOOP_TICK)
            self._tick()
            if time.time() >= next_line:
                self._print_line()
                next_line += report_every
        return True

    def _print_line(self) -> None:
        due = self.workload.report_interval_seconds + REPORT_EVERY / 2  # a report just after its window: jitter
        self.last_window = self.aggregate.take_window(self.ensemble.live_workers(), due)
        label = window_phase(self.phase, self.last_window)  # a window across warm-up's end: its larger part
        planned = planned_seconds(self.plan, self.workload)
        self.log.say(status_line(time.time() - self.load_started, label, self.last_window, planned))
        self.generator.see(self.phase, self.last_window)
        self.limits.see(self.last_window)

    def run(self) -> int:
        """The whole run. Returns the process exit code (0; RunFailed when a worker failed)."""
        with run_guards(self.bundle, self._on_signal):
            try:
                return self._run()
            except Exception as e:  # before its end account: keep what was measured, and say so
                record_failure(e, self.aggregate, self.metrics, self.log, self.journal)
                raise
            finally:
                self.journal.close()
                if self.live.heal_now():  # ended by an exception: heal all the same
                    self.log.write_background()
                self.observers.stop()
                self.barrier.stop()
                if self.phase != "done":  # ended by an exception: no worker may outlive the run
                    self._close_workers()

    def _close_workers(self) -> list[int]:
        """Every worker closed, one not closed in time killed (a failure to is noted): those not closed."""
        unclosed = self.ensemble.live_workers()
        try:
            for killed in self.ensemble.workers.close():
                self.log.event("worker_killed", worker=killed)
        except Exception as e:  # already failing: keep the first error, note this one  # noqa: BLE001
            self.log.event("workers_not_closed", reason=f"{type(e).__name__}: {e}")
        return unclosed

    def _run(self) -> int:
        w = self.workload
        self.prepare()
        self.log.say(
            f"run {self.run_id}: {len(self.topology.producers)} producer(s), {len(self.topology.consumers)} "
            f"consumer(s) on {self.ensemble.worker_count} worker(s); results in {self.bundle.path}"
        )
        if not self._wait(self.ensemble.all_ready, READY_TIMEOUT, 1e9):
            self._fail(self.failure or f"workers did not get ready within {READY_TIMEOUT:.0f}s")
        if not self.failure:
            self._await_assignments()
        self.load_started = time.time() + LOOP_TICK
        self.metrics = MetricsWriter(self.bundle.path / "metrics", self.load_started, behind=True)
        self.intake.start_load(self.load_started)
        for index in self.ensemble.live_workers():  # consumers paused from the start leave before any load
            if w.consumers_paused:
                self.ensemble.send(index, Update(w.model_dump(by_alias=True), max(1, len(self.topology.producers))))
            self.ensemble.send(index, StartLoad(self.load_started))
        self.aggregate.load_started = self.load_started
        self.aggregate.probing = getattr(self.plan, "probes", False)
        self.aggregate.restart_rates()  # reports from before load start say nothing of rates
        self.aggregate.take_window()  # the first status line covers load only
        self.observers.start_with_load()
        self.live.schedule_faults(w, self.load_started, live=False)
        self.intake.self_cost.start()
        self.log.event("load_started", warmup_seconds=w.warmup_seconds, duration_seconds=w.duration_seconds)
        self.phases.start_load(self.load_started - LOOP_TICK, w.warmup_seconds, self.load_started)
        self.desk.publish()  # `--detach` returns now: a status asked from then on shows load
        self.desk.phase("running")
        next_line = self.load_started + w.report_interval_seconds
        while not self.failure and not self.stop_requested and not self._plan_step():
            self._receive(LOOP_TICK)
            self._tick()
            if self.phases.measure_began():
                self.log.event("measure_started")
            if time.time() >= next_line:
                self._print_line()
                self.intake.self_cost.line_printed(next_line)
                next_line = max(next_line + self.workload.report_interval_seconds, time.time() + 0.5)
        return self._stop()

    def _await_assignments(self) -> None:
        """The start barrier (barrier.py): load starts once every consumer holds its assignment."""
        watch = self.barrier.watch(self._groups())
        if watch is None:
            return
        self.log.say(f"waiting until each of the {len(self.topology.consumers)} consumer(s) holds its assignment")
        self._wait(lambda: watch.finished, ASSIGNMENT_TIMEOUT + 30, 1e9)
        self.barrier.note(live=False)
        if watch.outcome != "done":
            self._fail(watch.outcome or f"consumers did not hold their assignments within {ASSIGNMENT_TIMEOUT:.0f}s")

    def _plan_step(self) -> bool:
        """Ask the plan what to do now; apply its changes. True when the load phase is over."""
        step = self.plan.step(time.time() - self.load_started, self.workload, self.aggregate)
        if step.evidence:
            self.log.event("plan_evidence", **step.evidence)
        if step.note:
            self.log.tell("plan", f"-- {self.plan.name}: {step.note}", plan=self.plan.name, note=step.note)
        if step.sets:
            try:
                self.modify(step.sets, by=self.plan.name)
            except DimsterError as e:
                self._fail(f"{self.plan.name} plan: {e}")
            self.desk.publish()  # a status asked for from now on shows the change
        return step.done or self._threshold_broken()

    def _threshold_broken(self) -> bool:
        """True when an abortOnFail threshold can no longer pass: the run stops as its plan would."""
        broken = self.intake.judge.check(self.phase, self.status, time.time())
        if broken:
            self.aborted_by, value = broken
            line = f"-- threshold '{self.aborted_by}' cannot pass any more ({value:g}): stopping the run"
            self.log.tell("threshold_abort", line, threshold=self.aborted_by, value=value)
        return broken is not None

    def _stop(self) -> int:
        forced = self.stop_requested > 1
        self.intake.self_cost.stop()
        plan_end = "duration" if isinstance(self.plan, SteadyPlan) else f"{self.plan.name} plan"
        plan_end = "threshold" if self.aborted_by else plan_end
        self.log.event("stopping", reason=self.failure or ("request" if self.stop_requested else plan_end))
        self.phases.enter("drain")
        self.desk.phase("stopping")
        self.live.stop_faults()  # heals what is still broken, while the run drains
        every = self.workload.report_interval_seconds
        self.ensemble.send_all(StopProducers())
        self._wait(self.ensemble.producers_stopped, 90, every)
        if self.workload.consumers_paused:
            self.log.event("drain_skipped", reason="consumers are paused", backlog=self.aggregate.backlog)
        elif not self.failure and not forced:
            self.log.event("drain_started", backlog=self.aggregate.backlog)
            drain = DrainWatch(self.aggregate, lambda: self.observers.broker_lag, self.live.healed, self.workload)
            drained = self._wait(drain.done, self.workload.drain_timeout_seconds, every)
            self.log.event("drain_ended", drained=drained, **drain.ended())
        # whatever ended the load (a failure or a forced stop too): no node stays paused or stopped
        if not self._wait(self.live.healed, self.live.heal_timeout(), 1e9, stoppable=False):
            self.log.event("faults_not_healed", message=f"faults not healed within {self.live.heal_timeout():.0f} s")
        self.log.write_background()
        self.phases.enter("closing")
        self.ensemble.send_all(Close())
        self._wait(self.ensemble.all_gone, 5 if forced else CLOSE_TIMEOUT, 1e9)
        unclosed = self._close_workers()
        if (failure := note_unclosed(unclosed, self.ensemble, self.aggregate, self.log, self.journal)) and not forced:
            self._fail(failure)
        self.phases.enter("done")
        a, groups, at = self.aggregate, list(self.topology.groups), self.phases.at
        self.unconsumed_by_group = self.observers.finish(self.metrics, at, groups, a.closes, a.backlog_by_group)
        if self.metrics:
            self.intake.flush(self.metrics, last=True)
        self.desk.publish()  # the last one: `lost` is known now
        if not self.workload.keep_topics:
            for problem in self.kafka.delete_topics(self.topology.topics):
                self.log.say(problem)
        return self._finish(forced)

    def _finish(self, forced: bool) -> int:
        end = close_account(self.aggregate, self.unconsumed_by_group, self.plan, self.workload, self.log)
        p50 = self.aggregate.e2e_measured.percentile(50)
        offsets = clock_offsets(self.ensemble.workers.clock_offsets(), p50, self.log)
        self.bundle.run_info.update({
            "failure": self.failure,
            "load_started": self.load_started,
            "topics": self.topology.topics,
            "groups": self.topology.groups,
            "consumer_assignment_seconds": self.barrier.seconds,
            "rebalances": {group: dict(counts) for group, counts in self.intake.rebalances.items()},
            "clock_offsets": offsets,
            "coordinator": self.intake.self_cost.as_record(),
            "final_workload": self.workload.to_yaml_dict(),
            "aborted_by": self.aborted_by,
        })  # fmt: skip
        if self.exporter:  # the final numbers (lost and unconsumed are known now)
            self.exporter.update(self.status())
        verdict_failure = record_end(end, forced, self.aggregate, self.log, self.plan.name)
        self.journal.remove()
        if self.failure:
            raise RunFailed(f"run failed: {self.failure} (results kept in {self.bundle.path})")
        if verdict_failure:
            raise CorrectnessFailed(f"{verdict_failure} (results kept in {self.bundle.path})")
        return 0

    # ---- the control API ----------------------------------------------------------------------------
    def _stop_asked(self) -> dict:
        self.stop_requested = max(self.stop_requested, 1)
        self.log.say("stop requested through the control API: producers stop, consumers drain")
        return {"stopping": True, "results": str(self.bundle.path)}

    def status(self) -> dict:
        return run_status(self)

    def modify(self, pairs: list[tuple[str, str]], by: str = "control") -> dict:
        """Validate the whole set, then apply it (nothing changes when a part is invalid); `by`: who asked."""
        if self.phase not in ("warmup", "measure"):
            raise DimsterError(f"the run is {self.phase}: modifications apply only while load runs")
        change = self.live.check(self.workload, pairs)
        if not change.changes and not change.crash and not change.restart:
            return {"applied": [], "notes": ["nothing changed"]}
        if change.new.warmup_seconds != self.workload.warmup_seconds:
            self.phases.move_measure(self.load_started + change.new.warmup_seconds)
        self.workload = change.new
        done = self.live.apply(change, by, self.load_started)
        self._placed(done.placed)
        self.intake.follow(change.new, (done.told_at, done.change), self.ensemble.live_workers())
        if done.watch_consumers:  # the consumers rejoin their groups: the timeline shows when they hold assignments
            self.barrier.watch(self._groups())
        if done.regroup_lag and self.observers.lag_watch:
            self.observers.watch_lag(self._groups(), self.metrics, self.phases.at, self.aggregate.backlog_by_group)
        return done.answer
