"""Which plan steers a run, by its mode: a new mode is its plan's module and one line in PLANS."""

from collections.abc import Callable

from dimster.coordinator.correctness import CorrectnessPlan
from dimster.coordinator.drain_backlog import DrainBacklogPlan
from dimster.coordinator.explore_limits import ExploreLimitsPlan
from dimster.coordinator.plans import RunPlan, SteadyPlan
from dimster.workload.model import Workload

PLANS: dict[str, Callable[[Workload], RunPlan]] = {
    "steady": lambda w: SteadyPlan(),
    "explore-limits": lambda w: ExploreLimitsPlan(w.mode, w),
    "drain-backlog": lambda w: DrainBacklogPlan(w.mode, w),
    "correctness": lambda w: CorrectnessPlan(w.mode, w.consumer_type),
}


def plan_for(workload: Workload) -> RunPlan:
    return PLANS[workload.mode.type](workload)
