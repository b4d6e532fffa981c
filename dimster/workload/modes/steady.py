"""The plain run: load for warmupSeconds + durationSeconds, nothing steered, nothing judged."""

from typing import Literal

from dimster.workload.modes.base import Panel, RunPlan, SteadyPlan, Workload
from dimster.workload.strict import Strict

NAME = "steady"


class Steady(Strict):
    """A plain run: load for warmupSeconds + durationSeconds."""

    type: Literal["steady"] = "steady"


def plan(workload: Workload) -> RunPlan:
    return SteadyPlan()


def problem(workload: Workload) -> str | None:
    """What the rest of the workload must be for this mode (None: nothing)."""
    return None


def line(mode: dict) -> str:
    return ""


def panel(mode: dict) -> Panel | None:
    return None


def load_seconds(workload: Workload) -> float:
    """About how long the load phase and the drain take, for `--dry-run`."""
    return workload.warmup_seconds + workload.duration_seconds + min(workload.drain_timeout_seconds, 10)
