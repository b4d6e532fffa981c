"""Whether dimster's load generator kept its schedule, window by window (diagnosis/generator.py): the
console says so within the window that shows it, the `generator_saturated` and `generator_keeps_up`
events mark when, and run.json's `generator` holds each phase's saturated time per worker. A measured
phase whose generator was saturated for SATURATED_PHASE_SHARE of its time is a saturated phase: its
latency and rate verdicts are undecided (verdict/judge.py, verdict/compare.py)."""

from dataclasses import dataclass, field

from dimster.coordinator.control.console import LOAD_PHASES
from dimster.coordinator.control.run_log import RunLog
from dimster.diagnosis.generator import phase_saturated
from dimster.results.bundle import ResultsBundle
from dimster.results.records import PhaseLoad as PhaseRecord


@dataclass
class PhaseLoad:
    """One phase: its time, the time some worker was saturated, and each worker's worst window."""

    seconds: float = 0.0
    saturated_seconds: float = 0.0
    unjudged_seconds: float = 0.0  # windows no report covered yet: the report that covers them judges them
    workers: dict[str, dict] = field(default_factory=dict)  # worker -> its worst saturated window's figures

    def to_json(self) -> PhaseRecord:
        return {
            "seconds": round(self.seconds, 2),
            "saturated_seconds": round(self.saturated_seconds, 2),
            "saturated": phase_saturated(self.saturated_seconds, self.seconds),
            "workers": self.workers,
        }


class GeneratorWatch:
    def __init__(self, log: RunLog, bundle: ResultsBundle):
        self.log, self.bundle = log, bundle
        self.phases: dict[str, PhaseLoad] = {}
        self.saturated = False  # the last window's

    def see(self, phase: str, window: dict) -> None:
        """One console window (RunAggregate.take_window) has ended, in `phase` by the loop's clock: its
        time goes to the phases its reports went under (a window across warm-up's end, to both)."""
        seconds = window.get("seconds") or 0.0
        for name, share in window_phases(phase, window).items():
            if name in LOAD_PHASES:
                self._see(name, seconds * share, window)

    def _see(self, phase: str, seconds: float, window: dict) -> None:
        loads = window.get("generator") or []
        load = self.phases.setdefault(phase, PhaseLoad())
        load.seconds += seconds
        if window.get("workerWaitShare") is None:
            # no worker's report covered it (a worker held from running reports late): the console's
            # state holds, and the phase's record waits for the late report, which covers this time too
            load.unjudged_seconds += seconds
            self._record()
            return
        saturated = bool(loads)
        judged, load.unjudged_seconds = seconds + load.unjudged_seconds, 0.0
        if saturated:
            load.saturated_seconds += judged
            for worker in loads:
                worst = load.workers.get(str(worker["worker"]))
                if worst is None or worker["wait_share"] >= worst["wait_share"]:
                    load.workers[str(worker["worker"])] = worker
        if saturated != self.saturated:
            self.saturated = saturated
            if loads:
                self.log.event("generator_saturated", phase=phase, workers=loads)
            else:
                self.log.event("generator_keeps_up", phase=phase)
        self._record()

    def _record(self) -> None:
        """run.json: what a verdict on this run's phases must know."""
        self.bundle.run_info["generator"] = {name: p.to_json() for name, p in self.phases.items()}

    def saturated_phases(self) -> list[str]:
        return [name for name, p in self.phases.items() if phase_saturated(p.saturated_seconds, p.seconds)]


def window_phases(phase: str, window: dict) -> dict[str, float]:
    """The share of a console window's time in each phase its reports went under (RunAggregate's
    `phases`); all of it in `phase` when no report told."""
    phases = window.get("phases") or {}
    total = sum(phases.values())
    return {name: seconds / total for name, seconds in phases.items()} if total > 0 else {phase: 1.0}


def window_phase(phase: str, window: dict) -> str:
    """The phase that holds most of a console window's time: its line's label."""
    shares = window_phases(phase, window)
    return max(shares, key=lambda name: shares[name])
