"""Live changes to a running run: `--modify --set` (validated whole, then applied), consumer crashes
and restarts, the faults schedule and broker redeploys. The one place that serialises what restarts a
node: a fault step and a redeploy never change nodes at the same time."""

import threading
import time
from dataclasses import dataclass, field

from dimster.clients.properties import check_client_configs, java_versions
from dimster.cluster.backend import ClusterBackend
from dimster.cluster.backends import backend_for
from dimster.coordinator.control.run_log import RunLog
from dimster.coordinator.live.changes import Change, live_changes
from dimster.coordinator.live.crashes import CRASH_KEY, RESTART_KEY, crash_count, due_crashes, restart_count, victims
from dimster.coordinator.live.faults import FaultRunner, check_faults, fault_steps
from dimster.coordinator.observers.run_kafka import ConfigChanges, RunKafka
from dimster.coordinator.workers.ensemble import Ensemble, Placed
from dimster.errors import DimsterError
from dimster.worker.protocol import CrashConsumers, RestartConsumers, Update
from dimster.workload.clients import role_key
from dimster.workload.model import Workload, parse_workload
from dimster.workload.overrides import apply_overrides


@dataclass
class ChangeSet:
    """A validated `--set`: what it changes, and what it needs done; nothing has happened yet."""

    new: Workload
    changes: list[Change]
    crash: int = 0
    restart: int = 0
    config_changes: ConfigChanges | None = None
    broker_cluster: ClusterBackend | None = None

    @property
    def effects(self) -> set[str]:
        return {c.effect for c in self.changes}


@dataclass
class Applied:
    """A change set applied: the control API's answer, and what the run loop has left to do."""

    answer: dict
    change: int  # the run's live changes so far, this one included (Update.change)
    told_at: float = 0.0  # epoch seconds the workers were sent the change
    placed: Placed = field(default_factory=Placed)  # clients a resize added
    watch_consumers: bool = False  # paused consumers resumed: time their joining
    regroup_lag: bool = False  # partitions grew: read the lag over all of them


class LiveChanges:
    def __init__(self, cluster: ClusterBackend, kafka: RunKafka, ensemble: Ensemble, log: RunLog, java: dict):
        self.cluster = cluster
        self.kafka = kafka
        self.ensemble = ensemble
        self.log = log
        self.java_versions = java  # role -> kafka-clients version of the run's Java clients at start
        self.changes = 0  # live changes applied so far (each one's Update carries its number)
        self.crashed = 0  # consumers crashed so far (crashConsumers, consumerCrashes)
        self.restarted = 0  # consumers restarted so far (restartConsumers)
        self.scheduled_crashes_fired = 0  # of consumerCrashes
        self.fault_runner: FaultRunner | None = None  # the workload's scheduled faults, while load runs
        self.node_changes = threading.Lock()  # held by whatever restarts, stops or pauses a node

    # ---- validate, then apply ---------------------------------------------------------------------
    def check(self, old: Workload, pairs: list[tuple[str, str]]) -> ChangeSet:
        """Validate the whole set, on the broker too where it changes configs; raises on any part."""
        crashes = [text for key, text in pairs if key == CRASH_KEY]
        restarts = [text for key, text in pairs if key == RESTART_KEY]
        pairs = [(key, text) for key, text in pairs if key not in (CRASH_KEY, RESTART_KEY)]
        new = parse_workload(apply_overrides(old.to_yaml_dict(), pairs), "--set")
        if (crashes or restarts) and new.consumers_per_group != old.consumers_per_group:
            raise DimsterError(f"--set: {CRASH_KEY} and {RESTART_KEY} go in a --set without consumersPerGroup")
        consumers = len(self.ensemble.live_consumers())
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
        change = ChangeSet(new, changes, crash, restart)
        if change.effects & {"topic-config", "partitions", "group-config"}:
            topology = self.ensemble.topology
            change.config_changes = self.kafka.config_changes(
                old, new, topology.topics, change.effects, list(topology.groups)
            )
            change.config_changes.validate()  # on the broker first: all or nothing
        if "faults" in change.effects:
            check_faults(new, self.cluster.profile)
        if "broker" in change.effects:
            change.broker_cluster = backend_for(self.cluster.profile.with_broker_config(new.broker_config))
            change.broker_cluster.check_broker_config()
        return change

    def apply(self, change: ChangeSet, by: str, load_started: float) -> Applied:
        """Apply a checked change set: broker configs, clients, the workers' settings, faults, redeploys,
        crashes; each change recorded with who asked (`by`: the control API, or the run's plan)."""
        new, effects = change.new, change.effects
        applied_at = time.time()
        notes = change.config_changes.apply() if change.config_changes else []
        self.changes += 1
        done = Applied({}, self.changes)
        if "client-count" in effects:
            done.placed = self.ensemble.resize(new.producers_per_topic, new.consumers_per_group, new.consumer_type)
        done.told_at = time.time()
        producers = max(1, len(self.ensemble.topology.producers))
        self.ensemble.send_all(Update(new.model_dump(by_alias=True), producers, self.changes))
        done.watch_consumers = "pause" in effects and not new.consumers_paused
        done.regroup_lag = "partitions" in effects
        if "faults" in effects:
            steps = self.schedule_faults(new, load_started)
            notes.append(f"faults: {steps} step(s) to come (steps whose time has passed are dropped)")
        if change.broker_cluster is not None:
            notes.append("broker config: redeploying in the background (watch the console and events)")
            threading.Thread(target=self._redeploy, args=(change.broker_cluster,), daemon=True).start()
        applied = [self._record(c, applied_at, by) for c in change.changes]
        if change.crash:
            applied.append(self.crash_consumers(change.crash, by))
        if change.restart:
            applied.append(self.restart_consumers(change.restart, by, new.static_membership))
        done.answer = {"applied": applied, "notes": notes}
        return done

    def _record(self, change: Change, applied_at: float, by: str) -> dict:
        plan = "" if by == "control" else ", by dimster tune" if by == "tune" else f", by the {by} plan"
        return self.log.modification(
            f"-- set {change.key}: {change.old} -> {change.new} ({change.effect}{plan})",
            key=change.key,
            old=change.old,
            new=change.new,
            effect=change.effect,
            applied=applied_at,
            by=by,
        )

    def _check_java_versions(self, new: Workload) -> None:
        """A role switched to Java clients live runs them in the workers' JVMs: their version must be its own."""
        versions = self.ensemble.worker_versions
        for role, version in java_versions(new, self.cluster.profile.kafka_version).items():
            if role not in self.java_versions and set(versions) != {version}:
                raise DimsterError(
                    f"--set clientLibrary.{role_key(role)}: its Java clients would run kafka-clients {version}, "
                    f"but the workers' JVMs run {', '.join(sorted(set(versions)))} "
                    "(a JVM holds one version, chosen when the run starts): start a new run"
                )

    # ---- consumer crashes and restarts ----------------------------------------------------------------
    def crash_consumers(self, count: int, by: str) -> dict:
        """Crash `count` share consumers now (see ConsumerClient.crash); recorded like a modification."""
        chosen = victims(self.ensemble.live_consumers(), count, self.crashed)
        self.crashed += count
        self.ensemble.send_to_hosts(chosen, CrashConsumers)
        plan = f", by the {by}" if by != "control" else ""
        return self.log.modification(
            f"-- crash {', '.join(chosen)}: they stop without acknowledging what they hold{plan}",
            key=CRASH_KEY,
            old=None,
            new=count,
            effect="crash",
            applied=time.time(),
            by=by,
            clients=chosen,
        )

    def restart_consumers(self, count: int, by: str, static_membership: bool) -> dict:
        """Restart `count` consumers now: each closes its Kafka client and starts a new one with the same
        client id (and group.instance.id, with staticMembership); recorded like a modification."""
        applied = time.time()  # before any consumer hears of it: its callbacks come after
        chosen = victims(self.ensemble.live_consumers(), count, self.restarted)
        self.restarted += count
        self.ensemble.send_to_hosts(chosen, RestartConsumers)
        static = " as static members" if static_membership else ""
        return self.log.modification(
            f"-- restart {', '.join(chosen)}: they close and join their group again{static}",
            key=RESTART_KEY,
            old=None,
            new=count,
            effect="restart",
            applied=applied,
            by=by,
            clients=chosen,
        )

    def crash_when_due(self, workload: Workload, elapsed: float) -> None:
        """Scheduled crashes (consumerCrashes) whose time has come."""
        for index in due_crashes(workload, elapsed, self.scheduled_crashes_fired):
            self.scheduled_crashes_fired = index + 1
            count = min(workload.consumer_crashes[index].consumers, len(self.ensemble.live_consumers()))
            if count and not workload.consumers_paused:
                self.crash_consumers(count, by="schedule")

    # ---- faults and redeploys -----------------------------------------------------------------------
    def schedule_faults(self, workload: Workload, load_started: float, live: bool = True) -> int:
        """Start the workload's faults schedule, or replace the steps still to come; how many there are.
        At load start (`live` False) every step is scheduled; a live change drops those already past."""
        steps = fault_steps(workload)
        if self.fault_runner is not None:
            return self.fault_runner.reschedule(steps)
        if not steps:
            return 0
        self.fault_runner = FaultRunner(
            self.cluster, [] if live else steps, load_started, self.log.background, self.node_changes,
            self.log.bundle.internal_error,
        )  # fmt: skip
        if live:  # the steps still to come, as any live change's
            self.fault_runner.reschedule(steps)
        self.fault_runner.start()
        return len(self.fault_runner.pending)

    def stop_faults(self) -> None:
        """Schedule no more faults; what is still broken heals on the faults thread."""
        if self.fault_runner:
            self.fault_runner.finish()

    def healed(self) -> bool:
        return self.fault_runner is None or self.fault_runner.done()

    def heal_timeout(self) -> float:
        """Each owed heal may wait for a node to start (startTimeoutSeconds), one after the other."""
        owed = len(self.fault_runner.unhealed) if self.fault_runner else 0
        return self.cluster.profile.start_timeout_seconds * (owed + 1)

    def heal_now(self) -> bool:
        """The run ends by an exception: heal all the same, waiting here. False when nothing was owed."""
        if self.fault_runner is None or self.fault_runner.done():
            return False
        self.fault_runner.finish()
        self.fault_runner.thread.join(self.heal_timeout())
        return True

    def _redeploy(self, cluster: ClusterBackend) -> None:
        """Runs on a helper thread; reports through the log's background queue."""
        events = self.log.background

        def progress(message: str) -> None:
            events.put(("cluster", {"message": message.strip()}))

        events.put(("broker_redeploy_started", {"message": "broker redeploy started"}))
        try:
            with self.node_changes:
                report = cluster.redeploy(progress)
            message = f"broker redeploy done: dynamic {report.dynamic}, restarted nodes {report.restarted_nodes}"
            events.put(("broker_redeploy_done", {"message": message}))
        except DimsterError as e:
            events.put(("broker_redeploy_failed", {"message": f"broker redeploy failed: {e}"}))
        except Exception as e:  # a bug: an event of the run, its traceback in the bundle's errors log  # noqa: BLE001
            reason = self.log.bundle.internal_error("broker redeploy", e)
            events.put(("broker_redeploy_failed", {"message": f"broker redeploy failed: {reason}"}))
