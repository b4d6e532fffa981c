"""The workload's `mode`: a plain run (steady) or a test mode that steers the run (explore-limits,
drain-backlog) or judges every record (correctness), each with its own settings."""

from typing import Annotated, Literal

from pydantic import Field, model_validator

from dimster.workload.strict import Strict


class Steady(Strict):
    """A plain run: load for warmupSeconds + durationSeconds."""

    type: Literal["steady"] = "steady"


class ExploreLimits(Strict):
    """The highest total producer rate that holds `targetE2eP99Ms` with a backlog that does not grow:
    ramp from `startRate` by `rampFactor` until a step fails, then bisect to `precision`. Each step
    settles, is judged over `stepSeconds`, then the backlog is drained (producers at 0, processing
    time removed) before the next one. durationSeconds does not apply: the search ends the run."""

    type: Literal["explore-limits"]
    target_e2e_p99_ms: float = Field(..., alias="targetE2eP99Ms", gt=0)
    start_rate: float = Field(1000, alias="startRate", gt=0)
    min_rate: float = Field(1, alias="minRate", gt=0)
    max_rate: float = Field(1_000_000, alias="maxRate", gt=0)
    ramp_factor: float = Field(2, alias="rampFactor", gt=1)
    precision: float = Field(0.05, gt=0, lt=1)  # stop when the failing rate is within this of the passing one
    settle_seconds: float = Field(5, alias="settleSeconds", ge=0)
    step_seconds: float = Field(20, alias="stepSeconds", gt=0)
    # consumers may fall behind producers by at most this fraction of the rate over a judged step
    max_backlog_growth: float = Field(0.02, alias="maxBacklogGrowth", ge=0)
    min_rate_achieved: float = Field(0.95, alias="minRateAchieved", gt=0, le=1)  # producers must reach it
    confirm: bool = True  # the limit must pass twice
    max_steps: int = Field(30, alias="maxSteps", ge=1)
    drain_timeout_seconds: float = Field(120, alias="drainTimeoutSeconds", gt=0)
    drain_stall_seconds: float = Field(15, alias="drainStallSeconds", gt=0)

    @model_validator(mode="after")
    def _rates(self):
        if not self.min_rate <= self.start_rate <= self.max_rate:
            raise ValueError("explore-limits needs minRate <= startRate <= maxRate")
        return self


class DrainBacklog(Strict):
    """Build a backlog of `backlogRecords` (or `backlogBytes`) with consumers paused, then resume them
    with producers at `residualRate`: the drain's throughput and time to empty."""

    type: Literal["drain-backlog"]
    backlog_records: int | None = Field(None, alias="backlogRecords", ge=1)
    backlog_bytes: int | None = Field(None, alias="backlogBytes", ge=1)
    residual_rate: float = Field(0, alias="residualRate", ge=0)
    build_timeout_seconds: float = Field(600, alias="buildTimeoutSeconds", gt=0)
    drain_timeout_seconds: float = Field(300, alias="drainTimeoutSeconds", gt=0)
    drain_stall_seconds: float = Field(30, alias="drainStallSeconds", gt=0)

    @model_validator(mode="after")
    def _one_size(self):
        if (self.backlog_records is None) == (self.backlog_bytes is None):
            raise ValueError("drain-backlog needs either backlogRecords or backlogBytes")
        return self


class Correctness(Strict):
    """Every record checked: payload checksums (corruption), per-partition order of each producer's
    records (consumer groups), loss and duplicates. A failed verdict exits with its own code."""

    type: Literal["correctness"]
    allow_duplicates: bool = Field(False, alias="allowDuplicates")


Mode = Annotated[Steady | ExploreLimits | DrainBacklog | Correctness, Field(discriminator="type")]
MODES = ("steady", "explore-limits", "drain-backlog", "correctness")
CHECKSUM_SIZE = 4  # correctness: the body starts with the CRC-32 of the rest


def mode_mapping(value):
    """`mode: correctness` is short for `mode: {type: correctness}`."""
    return {"type": value} if isinstance(value, str) else value
