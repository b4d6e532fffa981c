"""The drain-backlog plan: builds a backlog with the consumers paused, then times its drain."""

import math

from dimster.coordinator.plans import Drain, PlanStep, ReceiveSpan, RunView
from dimster.workload.model import DrainBacklog, Workload


class DrainBacklogPlan:
    """build (consumers paused) -> drain (consumers resumed, producers at the residual rate) -> done."""

    name = "drain-backlog"

    def __init__(self, settings: DrainBacklog, workload: Workload):
        self.s = settings
        self.target = settings.backlog_records or math.ceil(settings.backlog_bytes / workload.message_size)
        self.stage = "start"
        self.resumed_at = 0.0  # epoch s
        self.backlog = 0
        self.drain: Drain | None = None
        self.outcome = ""
        self.span = ReceiveSpan()
        self.drain_seconds: float | None = None
        self.left: int | None = None

    def step(self, elapsed: float, workload: Workload, run: RunView) -> PlanStep:
        if self.stage == "start":
            self.stage = "build"
            note = f"building a backlog of {self.target:,} records with consumers paused"
            return PlanStep(sets=[("consumersPaused", "true")], note=note)
        if self.stage == "build":
            timed_out = elapsed >= self.s.build_timeout_seconds
            if run.backlog < self.target and not timed_out:
                return PlanStep()
            self.backlog = run.backlog
            self.resumed_at = run.load_started + elapsed
            self.stage = "drain"
            # with residual load, a backlog of two seconds of it (reports every second, plus latency) is empty
            empty_at = math.floor(2 * self.s.residual_rate)
            self.drain = Drain(
                elapsed, self.backlog, self.s.drain_stall_seconds, self.s.drain_timeout_seconds, empty_at
            )
            run.mark_receiving()
            built = "built" if not timed_out else f"buildTimeoutSeconds reached at {self.backlog:,} records"
            return PlanStep(
                sets=[("producerRate", f"{self.s.residual_rate:g}"), ("consumersPaused", "false")],
                note=f"backlog {built} ({self.backlog:,} records): consumers resume",
            )
        if self.stage == "drain":
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
            return PlanStep(done=True, note=note, evidence={"plan": self.name, **result})
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
