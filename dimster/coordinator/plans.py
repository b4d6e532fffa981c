"""Run plans: what steers a run while load flows. A plan looks at the run every loop pass and answers
with live changes to make (applied through the same `modify` as `dimster run --modify`, so each lands
in modifications.jsonl and on the report's timeline, marked with the plan's name) and whether the
load phase is over. `SteadyPlan` is a plain run: nothing to change, over after warm-up + duration.
Test modes (explore-limits, drain-backlog) are further plans on this seam."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from dimster.workload.model import Workload


@dataclass
class PlanStep:
    sets: list[tuple[str, str]] = field(default_factory=list)  # live changes to apply now
    done: bool = False  # the load phase is over: stop producers, drain, close
    note: str = ""  # why, for the console and the events


class RunPlan(Protocol):
    name: str

    def step(self, elapsed: float, workload: Workload, status: Callable[[], dict]) -> PlanStep:
        """`elapsed`: seconds since load started; `workload`: as it is now (live changes included);
        `status()`: the run's status now (the control API's fields), for plans that judge it."""


class SteadyPlan:
    name = "steady"

    def step(self, elapsed: float, workload: Workload, status: Callable[[], dict]) -> PlanStep:
        # read every pass: durationSeconds and warmupSeconds can change live; 0 runs until stopped
        end = workload.warmup_seconds + workload.duration_seconds if workload.duration_seconds else float("inf")
        return PlanStep(done=elapsed >= end)
