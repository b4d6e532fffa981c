"""The drain-backlog mode: builds a backlog with the consumers paused, then times its drain."""

import math
from typing import Literal

from pydantic import Field, model_validator

from dimster.workload.modes.base import Drain, Panel, PlanStep, ReceiveSpan, RunPlan, RunView, Workload
from dimster.workload.strict import Strict

NAME = "drain-backlog"


class DrainBacklog(Strict):
    """Build a backlog of `backlogRecords` (or `backlogBytes`) with consumers paused, then resume them
    with producers at `residualRate`: the drain's throughput and time to empty. The drain is over at
    `emptyAtRecords` (default: two seconds of the residual rate); after it, load goes on for
    `afterDrainSeconds`. With `buildAfterWarmup`, the consumers pause only once warm-up is over."""

    type: Literal["drain-backlog"]
    backlog_records: int | None = Field(None, alias="backlogRecords", ge=1)
    backlog_bytes: int | None = Field(None, alias="backlogBytes", ge=1)
    residual_rate: float = Field(0, alias="residualRate", ge=0)
    build_timeout_seconds: float = Field(600, alias="buildTimeoutSeconds", gt=0)
    drain_timeout_seconds: float = Field(300, alias="drainTimeoutSeconds", gt=0)
    drain_stall_seconds: float = Field(30, alias="drainStallSeconds", gt=0)
    empty_at_records: int | None = Field(None, alias="emptyAtRecords", ge=0)
    after_drain_seconds: float = Field(0, alias="afterDrainSeconds", ge=0)
    build_after_warmup: bool = Field(False, alias="buildAfterWarmup")

    @model_validator(mode="after")
    def _one_size(self):
        if (self.backlog_records is None) == (self.backlog_bytes is None):
            raise ValueError("drain-backlog needs either backlogRecords or backlogBytes")
        return self


def backlog_target(settings: DrainBacklog, message_size: int) -> int:
    """The backlog to build, in records (a validator makes sure one of the two sizes is set)."""
    if settings.backlog_records is not None:
        return settings.backlog_records
    assert settings.backlog_bytes is not None
    return math.ceil(settings.backlog_bytes / message_size)


def empty_at(settings: DrainBacklog) -> int:
    """The backlog at or below which the drain is over: with residual load, a backlog of two seconds
    of it (reports every second, plus latency) is empty, unless emptyAtRecords says otherwise."""
    if settings.empty_at_records is not None:
        return settings.empty_at_records
    return math.floor(2 * settings.residual_rate)


def plan(workload: Workload) -> RunPlan:
    assert isinstance(workload.mode, DrainBacklog)
    return DrainBacklogPlan(workload.mode, workload)


def problem(workload: Workload) -> str | None:
    """What the rest of the workload must be for this mode (None: nothing)."""
    if not (workload.total_producers and workload.total_consumers):
        return "mode drain-backlog needs producers and consumers"
    return None


def line(mode: dict) -> str:
    rate, seconds = mode.get("drain_msgs_per_s"), mode.get("drain_seconds")
    pace = f" at {rate:,.0f} msg/s" if rate else ""
    empty = f", empty {seconds:.2f} s after the consumers resumed" if seconds is not None else ""
    return f"drain-backlog: {mode.get('outcome')}, {mode.get('backlog') or 0:,} records{pace}{empty}"


def panel(mode: dict) -> Panel | None:
    return None


def load_seconds(workload: Workload) -> float:
    """About how long the build and the drain take, for `--dry-run`."""
    mode = workload.mode
    target = backlog_target(mode, workload.message_size)
    build = min(target / workload.producer_rate, mode.build_timeout_seconds) if workload.producer_rate else 0
    warmup = workload.warmup_seconds if mode.build_after_warmup else 0
    return warmup + build + min(mode.drain_timeout_seconds, 30) + mode.after_drain_seconds


class DrainBacklogPlan:
    """[wait for warm-up's end] -> build (consumers paused) -> drain (consumers resumed, producers at the
    residual rate) -> [after: load goes on for afterDrainSeconds] -> done."""

    name = "drain-backlog"

    def __init__(self, settings: DrainBacklog, workload: Workload):
        self.s = settings
        self.target = backlog_target(settings, workload.message_size)
        self.stage = "start"
        self.resumed_at = 0.0  # epoch s
        self.backlog = 0
        self.drain: Drain | None = None
        self.outcome = ""
        self.span = ReceiveSpan()
        self.drain_seconds: float | None = None
        self.left: int | None = None
        self.build_started = 0.0  # elapsed s
        self.after_until = 0.0  # elapsed s

    def step(self, elapsed: float, workload: Workload, run: RunView) -> PlanStep:
        if self.stage == "start":
            if self.s.build_after_warmup and elapsed < workload.warmup_seconds:
                return PlanStep()
            self.stage = "build"
            self.build_started = elapsed if self.s.build_after_warmup else 0.0
            note = f"building a backlog of {self.target:,} records with consumers paused"
            return PlanStep(sets=[("consumersPaused", "true")], note=note)
        if self.stage == "build":
            timed_out = elapsed - self.build_started >= self.s.build_timeout_seconds
            if run.backlog < self.target and not timed_out:
                return PlanStep()
            self.backlog = run.backlog
            self.resumed_at = run.load_started + elapsed
            self.stage = "drain"
            self.drain = Drain(
                elapsed, self.backlog, self.s.drain_stall_seconds, self.s.drain_timeout_seconds, empty_at(self.s)
            )
            run.mark_receiving()
            built = "built" if not timed_out else f"buildTimeoutSeconds reached at {self.backlog:,} records"
            return PlanStep(
                sets=[("producerRate", f"{self.s.residual_rate:g}"), ("consumersPaused", "false")],
                note=f"backlog {built} ({self.backlog:,} records): consumers resume",
            )
        if self.stage == "drain":
            assert self.drain is not None  # the stage is "drain" only once a drain has started
            outcome = self.drain.outcome(elapsed, run.backlog)
            if outcome is None:
                return PlanStep()
            self.outcome, self.stage, self.span = outcome, "done", run.receiving()
            self.left = run.backlog
            if outcome == "drained" and self.span.last:
                self.drain_seconds = self.span.last - self.resumed_at
            result = self.result()
            note = f"drain {outcome}: " + (
                f"{result['drain_msgs_per_s']:,.0f} msg/s, empty {self.drain_seconds:.2f} s after resuming"
                if self.drain_seconds is not None and result["drain_msgs_per_s"]
                else f"{self.left:,} records left"
            )
            if outcome == "drained" and self.s.after_drain_seconds:
                self.stage, self.after_until = "after", elapsed + self.s.after_drain_seconds
                note += f"; load goes on for {self.s.after_drain_seconds:g} s"
            return PlanStep(done=self.stage == "done", note=note, evidence={"plan": self.name, **result})
        if self.stage == "after" and elapsed >= self.after_until:
            self.stage = "done"
            return PlanStep(done=True, note=f"{self.s.after_drain_seconds:g} s of load after the drain are over")
        return PlanStep()

    def result(self, totals: dict | None = None, run: RunView | None = None) -> dict:
        span = self.span
        consuming = span.last - span.first if span.received else 0.0
        return {
            "type": self.name,
            "backlog_target": self.target,
            "backlog": self.backlog,
            "residual_rate": self.s.residual_rate,
            "outcome": self.outcome or "interrupted",
            "drained": self.outcome == "drained",
            "drain_seconds": None if self.drain_seconds is None else round(self.drain_seconds, 3),
            "first_record_seconds": round(span.first - self.resumed_at, 3) if span.received else None,
            "received": span.received,
            # from the first record to the last: the consumers' pace, without their rejoining
            "drain_msgs_per_s": round(span.received / consuming, 1) if consuming > 0 else None,
            "backlog_left": self.left,
        }
