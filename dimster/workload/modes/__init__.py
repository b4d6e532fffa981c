"""Run modes, one module each: a plain run (steady), test modes that steer the run (explore-limits,
drain-backlog, max-rate) and one that judges every record (correctness). A mode's module holds its
settings (the workload's `mode`), its plan (what steers the run and judges it at the end), its console
line, its report panel and its dry-run estimate. A new mode is its module, one line in MODULES and its
settings in `Mode`."""

from types import ModuleType
from typing import Annotated

from pydantic import Field

from dimster.workload.modes import correctness, drain_backlog, explore_limits, max_rate, steady
from dimster.workload.modes.base import Panel, RunPlan, Workload

MODULES: dict[str, ModuleType] = {m.NAME: m for m in (steady, explore_limits, drain_backlog, max_rate, correctness)}
MODES = tuple(MODULES)

Mode = Annotated[
    steady.Steady
    | explore_limits.ExploreLimits
    | drain_backlog.DrainBacklog
    | max_rate.MaxRate
    | correctness.Correctness,
    Field(discriminator="type"),
]


def mode_mapping(value):
    """`mode: correctness` is short for `mode: {type: correctness}`."""
    return {"type": value} if isinstance(value, str) else value


def plan_for(workload: Workload) -> RunPlan:
    return MODULES[workload.mode.type].plan(workload)


def problem(workload: Workload) -> str | None:
    """What the workload's mode needs of the rest of the workload and does not find (None: all well)."""
    return MODULES[workload.mode.type].problem(workload)


def checksums(workload: Workload) -> bool:
    """Whether producers write checksummed bodies (and consumers check them) in this mode."""
    return getattr(MODULES[workload.mode.type], "CHECKSUMS", False)


def mode_line(mode: dict) -> str:
    """What a test mode found (run.json's `mode`), in one line ('' for a plain run)."""
    module = MODULES.get(mode.get("type") or "")
    return module.line(mode) if module else ""


def mode_panel(mode: dict) -> Panel | None:
    """A test mode's table for the report (None: its figures go in a plain list)."""
    module = MODULES.get(mode.get("type") or "")
    return module.panel(mode) if module else None


def load_seconds(workload: Workload) -> float:
    """About how long a run's load phase and drain take, for `--dry-run`."""
    return MODULES[workload.mode.type].load_seconds(workload)
