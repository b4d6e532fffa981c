"""Scheduled broker faults (`faults:` in the workload): a helper thread kills, pauses or restarts
nodes of the run's cluster at their time and heals them `durationSeconds` later. Each step reaches
the run as an event `fault` (action, node) through its background queue. Whatever the run's end
leaves unhealed is healed then, so the next run finds its cluster whole."""

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from dimster.cluster.backend import ClusterBackend
from dimster.cluster.local_nodes import LocalProfile
from dimster.environment import EnvironmentProfile
from dimster.errors import DimsterError
from dimster.workload.model import HEALS, Workload


@dataclass(frozen=True)
class FaultStep:
    at: float  # seconds after load started
    action: str  # kill | pause | restart | isolate | isolate-all, or a heal: start | resume | rejoin
    node: int


def fault_steps(workload: Workload) -> list[FaultStep]:
    """The workload's faults and their heals, in time order (a fault before its heal)."""
    steps = []
    for fault in workload.faults:
        steps.append(FaultStep(fault.at_seconds, fault.action, fault.node))
        if fault.duration_seconds is not None:
            steps.append(FaultStep(fault.at_seconds + fault.duration_seconds, HEALS[fault.action], fault.node))
    return sorted(steps, key=lambda step: step.at)


def check_faults(workload: Workload, profile: EnvironmentProfile) -> None:
    """One line when the workload's faults cannot happen on the environment."""
    if not workload.faults:
        return
    if not isinstance(profile, LocalProfile):  # the profile of every environment of backend local
        raise DimsterError(
            f"faults: for clusters of backend local, whose nodes dimster runs as processes; "
            f"'{profile.name}' is backend {profile.backend}"
        )
    for index, fault in enumerate(workload.faults):
        if fault.action.startswith("isolate") and not profile.node_network:
            raise DimsterError(
                f"faults.{index}.action: {fault.action} needs a profile with nodeNetwork (each node in a network "
                f"namespace of its own); run/environments/{profile.name}.yaml has none"
            )
        if fault.node not in profile.node_ids:
            raise DimsterError(
                f"faults.{index}.node: {fault.node} is not a node of '{profile.name}' "
                f"(nodes {', '.join(map(str, profile.node_ids))})"
            )


class FaultRunner:
    """Carries out fault steps at their time on a helper thread, each of `steps` (one whose time has
    passed as it starts, at once); `reschedule` replaces the steps still to come (a live `--set
    faults=...`)."""

    def __init__(
        self,
        cluster: ClusterBackend,
        steps: list[FaultStep],
        load_started: float,
        events: queue.Queue,
        node_changes: "threading.Lock | None" = None,
        internal_error: Callable[[str, BaseException], str] = lambda _where, e: f"{type(e).__name__}: {e}",
    ):
        self.cluster = cluster
        self.internal_error = internal_error  # a bug's line, its traceback kept (ResultsBundle.internal_error)
        self.node_changes = node_changes or threading.Lock()  # held while a step changes a node
        self.load_started = load_started
        self.events = events  # (event kind, details) for the run's main loop
        self.pending: list[FaultStep] = []
        self.unhealed: list[tuple[str, int]] = []  # (heal, node) of faults that happened, not healed yet
        self.stopping = False
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="faults", daemon=True)
        # all of them: the load started before this runner (a fault at 0 s, or a host's busy moment,
        # would otherwise have been dropped as past)
        self.pending = sorted(steps, key=lambda step: step.at)

    def start(self) -> None:
        self.thread.start()

    def reschedule(self, steps: list[FaultStep]) -> int:
        """The steps of `steps` still to come replace the pending ones, but for the heals of faults
        that have happened (a node stays broken only as long as its fault says); returns how many
        steps there are to come."""
        now = time.time() - self.load_started
        with self.changed:
            kept = [step for step in self.pending if (step.action, step.node) in self.unhealed]
            self.pending = sorted(kept + [step for step in steps if step.at > now], key=lambda step: step.at)
            self.changed.notify()
            return len(self.pending)

    def finish(self) -> None:
        """Schedule nothing more; the thread heals what is left unhealed, then ends."""
        with self.changed:
            self.stopping = True
            self.changed.notify()

    def done(self) -> bool:
        return not self.thread.is_alive()

    def _next(self) -> FaultStep | None:
        """The next step once it is due; None once the runner is finishing."""
        with self.changed:
            while not self.stopping:
                wait = self.load_started + self.pending[0].at - time.time() if self.pending else None
                if wait is not None and wait <= 0:
                    return self.pending.pop(0)
                self.changed.wait(None if wait is None else min(wait, 60))
            return None

    def _run(self) -> None:
        try:
            while (step := self._next()) is not None:
                self._do(step, "faults schedule")
        finally:
            with self.changed:
                owed = list(self.unhealed)
            for action, node in owed:
                self._do(FaultStep(0, action, node), "at the end of the load")

    def _do(self, step: FaultStep, why: str) -> None:
        try:
            with self.node_changes:
                began = time.time()
                done = self.cluster.fault(step.node, step.action, progress=lambda _line: None)
        except Exception as e:  # a fault that cannot happen is an event of the run, never its end  # noqa: BLE001
            reason = str(e) if isinstance(e, DimsterError) else self.internal_error("fault", e)
            message = f"fault {step.action} of node {step.node} failed: {reason}"
            self.events.put(("fault_failed", {"action": step.action, "node": step.node, "message": message}))
            return
        with self.changed:
            if step.action in HEALS:
                self.unhealed.append((HEALS[step.action], step.node))
            elif (step.action, step.node) in self.unhealed:
                self.unhealed.remove((step.action, step.node))
        took = time.time() - began  # a heal or restart waits for the node to register: the event comes then
        details = {"action": step.action, "node": step.node, "began": began, "seconds": round(took, 1)}
        self.events.put(("fault", {**details, "message": f"{done} ({why}, {took:.1f} s)"}))
