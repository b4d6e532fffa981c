"""The max-rate mode: OpenMessaging Benchmark's search for the maximum sustainable rate (OMB's
`producerRate: 0`), a feedback loop that sets the producer rate every few seconds for the whole run
and never converges: the rate wanders around the highest one producers and consumers keep up with."""

from typing import Literal

from pydantic import Field, model_validator

from dimster.workload.modes.base import Panel, PlanStep, RunPlan, RunView, Workload
from dimster.workload.strict import Strict

NAME = "max-rate"


class MaxRate(Strict):
    """Start at `startRate`; every `controlSeconds`, cut the rate when the consumers are more than
    `receiveBacklogLimit` records behind or the producers more than `publishBacklogLimit` records short
    of the rate, else raise it by the ramping factor (halved at each cut, doubled at each rise, within
    [minRampingFactor, maxRampingFactor]). Ends at warmupSeconds + durationSeconds, like a plain run."""

    type: Literal["max-rate"]
    start_rate: float = Field(10_000, alias="startRate", gt=0)  # OMB: targetPublishRate = 10000
    control_seconds: float = Field(3, alias="controlSeconds", gt=0)  # OMB: controlPeriodMillis = 3000
    publish_backlog_limit: int = Field(1000, alias="publishBacklogLimit", ge=0)
    receive_backlog_limit: int = Field(1000, alias="receiveBacklogLimit", ge=0)
    min_ramping_factor: float = Field(0.01, alias="minRampingFactor", gt=0)
    max_ramping_factor: float = Field(1.0, alias="maxRampingFactor", gt=0)

    @model_validator(mode="after")
    def _factors(self):
        if self.min_ramping_factor > self.max_ramping_factor:
            raise ValueError("max-rate needs minRampingFactor <= maxRampingFactor")
        return self


def plan(workload: Workload) -> RunPlan:
    assert isinstance(workload.mode, MaxRate)
    return MaxRatePlan(workload.mode)


def problem(workload: Workload) -> str | None:
    """What the rest of the workload must be for this mode (None: nothing)."""
    if workload.producer_rate_schedule is not None:
        return "mode max-rate sets the producer rate itself: drop producerRateSchedule"
    if not (workload.total_producers and workload.total_consumers):
        return "mode max-rate needs producers and consumers"
    return None


def line(mode: dict) -> str:
    final = mode.get("final_rate_msgs_per_s") or 0
    return f"max-rate: {final:,.0f} msg/s at the end ({mode.get('adjustments') or 0} adjustments)"


def panel(mode: dict) -> Panel | None:
    return None  # one step every few seconds: the rate charts and their markers show them


def load_seconds(workload: Workload) -> float:
    """About how long the load phase and the drain take, for `--dry-run`."""
    return workload.warmup_seconds + workload.duration_seconds + 10


class RateController:
    """A port of OMB's `RateController.nextRate` (benchmark-framework, RateController.java), given the
    counts of one period rather than running totals, and the backlog as dimster measures it."""

    def __init__(self, settings: MaxRate):
        self.s = settings
        self.factor = settings.max_ramping_factor

    def next_rate(
        self, rate: float, seconds: float, published: int, received: int, receive_backlog: int
    ) -> tuple[float, str]:
        """The next rate and why: `published` records acknowledged and `received` consumed over the
        period of `seconds`; `receive_backlog` records acknowledged and not yet consumed."""
        expected = int(rate * seconds)
        if receive_backlog > self.s.receive_backlog_limit:
            return self._cut(seconds, received, expected, receive_backlog), "receive backlog"
        publish_backlog = expected - published
        if publish_backlog > self.s.publish_backlog_limit:
            return self._cut(seconds, published, expected, publish_backlog), "publish backlog"
        self.factor = min(self.s.max_ramping_factor, self.factor * 2)
        return rate + rate * self.factor, "no backlog"

    def _cut(self, seconds: float, actual: int, expected: int, backlog: int) -> float:
        """What was done, or what was expected less the backlog, whichever is lower."""
        self.factor = max(self.s.min_ramping_factor, self.factor / 2)
        return min(actual / seconds, max(0, expected - backlog) / seconds)


class MaxRatePlan:
    """start -> a control step every controlSeconds -> done at warmupSeconds + durationSeconds."""

    name = "max-rate"
    runs_its_duration = True  # ends like a plain run (planned_seconds)
    probes = True  # steers from the aggregate's probe (see RunView.take_probe)

    def __init__(self, settings: MaxRate):
        self.s = settings
        self.controller = RateController(settings)
        self.rate = settings.start_rate  # the controller's, applied when it moves by 1 % or more
        self.changes: list[tuple[float, float]] = []  # (elapsed, rate) each time producerRate was set
        self.steps: list[dict] = []
        self.next_at: float | None = None
        self.warmup = 0.0
        self.last = 0.0  # elapsed at the latest step

    def step(self, elapsed: float, workload: Workload, run: RunView) -> PlanStep:
        self.last, self.warmup = elapsed, workload.warmup_seconds
        if self.next_at is None:
            run.take_probe()  # what came before belongs to no period
            self.next_at = elapsed + self.s.control_seconds
            self.changes.append((elapsed, self.rate))
            note = f"starting at {self.rate:,.0f} msg/s, a control step every {self.s.control_seconds:g} s"
            return PlanStep(sets=[("producerRate", f"{self.rate:.6g}")], note=note)
        # read every pass: durationSeconds and warmupSeconds can change live; 0 runs until stopped
        end = workload.warmup_seconds + workload.duration_seconds if workload.duration_seconds else float("inf")
        if elapsed >= end:
            mean, adjustments = self.mean_rate() or 0, len(self.changes) - 1
            note = f"{self.changes[-1][1]:,.0f} msg/s at the end ({adjustments} adjustments), {mean:,.0f} on average"
            return PlanStep(done=True, note=note)
        if elapsed < self.next_at:
            return PlanStep()
        probe = run.take_probe()
        if probe.seconds == 0:  # no report yet: the next pass looks again
            return PlanStep()
        self.next_at = elapsed + self.s.control_seconds
        published, received = round(probe.acked * probe.seconds), round(probe.consumed * probe.seconds)
        backlog = run.backlog
        rate, reason = self.controller.next_rate(self.rate, probe.seconds, published, received, backlog)
        # OMB's worker runs at least 1 msg/s; its controller, left at 0, would stay there
        self.rate = max(1.0, rate)
        self.steps.append(
            {
                "at": round(elapsed, 2),
                "rate": round(self.rate, 1),
                "reason": reason,
                "published": published,
                "consumed": received,
                "backlog": backlog,
            }
        )
        applied = self.changes[-1][1]
        if abs(self.rate - applied) < 0.01 * applied:  # fewer modifications and timeline markers
            return PlanStep()
        self.changes.append((elapsed, self.rate))
        return PlanStep(sets=[("producerRate", f"{self.rate:.6g}")])

    def mean_rate(self) -> float | None:
        """The rate asked of the producers, averaged over the time from warm-up's end to the latest step."""
        span = self.last - self.warmup
        if span <= 0 or not self.changes:
            return None
        ends = [at for at, _ in self.changes[1:]] + [self.last]
        weighted = sum(
            rate * (min(end, self.last) - max(at, self.warmup))
            for (at, rate), end in zip(self.changes, ends, strict=True)
            if end > self.warmup
        )
        return weighted / span

    def result(self, totals: dict | None = None, run: RunView | None = None) -> dict:
        mean = self.mean_rate()
        return {
            "type": self.name,
            "start_rate_msgs_per_s": self.s.start_rate,
            "final_rate_msgs_per_s": round(self.changes[-1][1], 1) if self.changes else None,
            "mean_rate_msgs_per_s": None if mean is None else round(mean, 1),
            "adjustments": max(0, len(self.changes) - 1),
            "step_count": len(self.steps),
            "steps": self.steps,
        }
