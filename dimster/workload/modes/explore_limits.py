"""The explore-limits mode: a search for the highest rate that holds a latency target, one step per
rate, judged from a probe of the reports, with a drain between steps."""

import math
from typing import Literal

from pydantic import Field, model_validator

from dimster.diagnosis.generator import sentence
from dimster.metrics.schema import WAITING_NOTED
from dimster.workload.modes.base import Drain, Panel, PlanStep, RunPlan, RunView, Workload
from dimster.workload.strict import Strict

NAME = "explore-limits"


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


def plan(workload: Workload) -> RunPlan:
    assert isinstance(workload.mode, ExploreLimits)
    return ExploreLimitsPlan(workload.mode, workload)


def problem(workload: Workload) -> str | None:
    """What the rest of the workload must be for this mode (None: nothing)."""
    if workload.producer_rate_schedule is not None:
        return "mode explore-limits sets the producer rate itself: drop producerRateSchedule"
    if not (workload.total_producers and workload.total_consumers):
        return "mode explore-limits needs producers and consumers"
    return None


def line(mode: dict) -> str:
    return f"explore-limits: {mode.get('verdict')} over {mode.get('step_count')} step(s)"


def panel(mode: dict) -> Panel | None:
    """The search's steps, one row each."""
    if not mode.get("steps"):
        return None
    headers = ["step", "rate", "verdict", "published/s", "consumed/s", "e2e p99 ms", "backlog/s", "drain", "why"]
    kinds = ["integer", "decimal", "text", "decimal", "decimal", "decimal", "decimal", "text", "text"]
    rows = [
        [
            s["step"],
            s["rate"],
            {True: "pass", False: "fail", None: "undecided"}[s["passed"]],
            s["published_msgs_per_s"],
            s["consumed_msgs_per_s"],
            s["e2e_p99_ms"],
            s["backlog_growth_msgs_per_s"],
            (s.get("drain") or {}).get("outcome"),
            "; ".join(s["reasons"]),
        ]
        for s in mode["steps"]
    ]
    return Panel(headers, kinds, rows)


def load_seconds(workload: Workload) -> float:
    """About how long the search takes, for `--dry-run`."""
    mode = workload.mode
    ramp = math.log(max(mode.max_rate / mode.start_rate, 1.0)) / math.log(mode.ramp_factor)
    steps = min(mode.max_steps, math.ceil(min(ramp, 6)) + math.ceil(math.log2(1 / mode.precision)) + 2)
    return steps * (mode.settle_seconds + mode.step_seconds + 5)


class RateSearch:
    """Which rate to try next, from every verdict so far: ramp by `factor` until a rate fails (or fall
    by it while none passes), then bisect between the highest rate that passed below the lowest that
    failed, until they are within `precision`; with `confirm`, the limit must pass twice. A rate that
    failed once counts as failing, so a lucky pass is caught by its confirmation."""

    def __init__(self, start: float, factor: float, precision: float, low: float, high: float, confirm: bool):
        self.start, self.factor, self.precision = start, factor, precision
        self.low, self.high, self.confirm = low, high, confirm
        self.verdicts: list[tuple[float, bool]] = []

    def record(self, rate: float, passed: bool) -> None:
        self.verdicts.append((rate, passed))

    @property
    def lowest_failed(self) -> float | None:
        return min((r for r, ok in self.verdicts if not ok), default=None)

    @property
    def limit(self) -> float | None:
        """The highest rate that passed and lies below every rate that failed."""
        ceiling = self.lowest_failed
        return max((r for r, ok in self.verdicts if ok and (ceiling is None or r < ceiling)), default=None)

    def next_rate(self) -> float | None:
        """The next rate to try, or None when the search is over."""
        if not self.verdicts:
            return self.start
        failed, limit = self.lowest_failed, self.limit
        if failed is None:  # ramp up: every verdict so far passed, so there is a limit
            assert limit is not None
            if limit >= self.high:
                return self._confirmed(limit)
            return min(self.high, limit * self.factor)
        if limit is None:  # nothing passed yet: come down
            lower = failed / self.factor
            return None if failed <= self.low else max(self.low, lower)
        middle = _round_rate((limit + failed) / 2)
        if failed / limit - 1 > self.precision and limit < middle < failed:
            return middle
        return self._confirmed(limit)

    def unconfirmed(self, limit: float) -> bool:
        """Whether `limit` still needs the second pass `confirm` asks for."""
        return self.confirm and sum(1 for r, ok in self.verdicts if ok and r == limit) < 2

    def _confirmed(self, limit: float) -> float | None:
        return limit if self.unconfirmed(limit) else None


def _round_rate(rate: float) -> float:
    """Rates to three significant digits, so that the timeline reads 812 msg/s, not 812.3046875."""
    if rate <= 0:
        return rate
    digits = 2 - math.floor(math.log10(rate))
    return round(rate, max(digits, 0))


class ExploreLimitsPlan:
    """settle -> judge -> drain, per rate the search picks, until the search is over."""

    name = "explore-limits"
    probes = True  # judges steps from the aggregate's probe (see RunView.take_probe)

    def __init__(self, settings: ExploreLimits, workload: Workload):
        self.s = settings
        self.search = RateSearch(
            settings.start_rate,
            settings.ramp_factor,
            settings.precision,
            settings.min_rate,
            settings.max_rate,
            settings.confirm,
        )
        self.processing: tuple[float, float] | None = None  # what a drain removed, to restore after it
        self.steps: list[dict] = []
        self.stage = "start"
        self.rate = 0.0
        self.until = 0.0
        self.backlog_at_judge = 0  # when the judged span began
        self.drain: Drain | None = None
        self.verdict = ""
        self.undecided_at: float | None = None  # the rate of the last step, when it was undecided
        self.stopped = ""  # why the search stopped before it ended

    def step(self, elapsed: float, workload: Workload, run: RunView) -> PlanStep:
        if self.stage == "start":
            return self._next_rate(elapsed, run)
        if self.stage == "settle" and elapsed >= self.until:
            run.take_probe()  # what came before belongs to the settling
            self.backlog_at_judge = run.backlog
            self.stage, self.until = "judge", elapsed + self.s.step_seconds
        elif self.stage == "judge" and elapsed >= self.until:
            return self._judge(elapsed, workload, run)
        elif self.stage == "drain":
            return self._draining(elapsed, run)
        return PlanStep()

    def _next_rate(self, elapsed: float, run: RunView) -> PlanStep:
        rate = (self.undecided_at or self.search.next_rate()) if len(self.steps) < self.s.max_steps else None
        if rate is None:
            return self._finish()
        self.rate, self.stage, self.until = rate, "settle", elapsed + self.s.settle_seconds
        sets = [("producerRate", f"{rate:g}"), *self._restore()]
        return PlanStep(sets=sets, note=f"step {len(self.steps) + 1}: {rate:g} msg/s")

    def _restore(self) -> list[tuple[str, str]]:
        """The processing time the last drain removed, as it was when that drain began."""
        if self.processing is None:
            return []
        low, high = self.processing
        self.processing = None
        return [("consumerProcMsMin", f"{low:g}"), ("consumerProcMsMax", f"{high:g}")]

    def _judge(self, elapsed: float, workload: Workload, run: RunView) -> PlanStep:
        probe = run.take_probe()
        seconds, published, consumed = probe.seconds, probe.published, probe.consumed
        p50, p99 = probe.e2e.percentile(50), probe.e2e.percentile(99)
        waited = max((load.wait_share for load in probe.generator), default=0.0)
        reasons: list[tuple[str, bool]] = []  # why it failed, and whether a saturated generator could be why
        if published < self.s.min_rate_achieved * self.rate:
            reasons.append((f"producers reached {published:.0f} of {self.rate:g} msg/s", True))
        if p99 is None:
            reasons.append(("no record was consumed", False))
        elif p99 / 1000 > self.s.target_e2e_p99_ms:
            reasons.append((f"e2e p99 {p99 / 1000:.1f} ms over the target {self.s.target_e2e_p99_ms:g} ms", True))
        if probe.behind > self.s.max_backlog_growth * self.rate:  # more than its workers' wait can explain?
            explained = probe.behind <= (self.s.max_backlog_growth + waited) * self.rate
            reasons.append((f"consumers fell behind: the backlog grew {probe.behind:.0f} msg/s", explained))
        passed, told = not reasons, [text for text, _ in reasons]
        # a failure dimster's own wait may explain says nothing of Kafka: undecided, and tried once more
        undecided = bool(probe.generator) and bool(reasons) and all(explained for _, explained in reasons)
        generator = [load.to_json() for load in probe.generator]
        if undecided:
            if self.undecided_at == self.rate:
                workers = "; ".join(sentence(load) for load in generator)
                self.stopped = f"the load generator was saturated at {self.rate:g} msg/s twice ({workers})"
            self.undecided_at = self.rate
        else:
            self.undecided_at = None
            self.search.record(self.rate, passed)
        evidence = {
            "step": len(self.steps) + 1,
            "rate": self.rate,
            "passed": None if undecided else passed,
            "reasons": told,
            "judged_seconds": round(seconds, 2),
            "published_msgs_per_s": round(published, 1),
            "consumed_msgs_per_s": round(consumed, 1),
            "e2e_p50_ms": None if p50 is None else round(p50 / 1000, 2),
            "e2e_p99_ms": None if p99 is None else round(p99 / 1000, 2),
            "backlog_growth_msgs_per_s": round(probe.behind, 1),
            "backlog_start": self.backlog_at_judge,
            "backlog_end": run.backlog,
            "worker_wait_share": None if probe.worker_wait_share is None else round(probe.worker_wait_share, 3),
            "generator": generator,  # the workers that could not keep their schedule (none: it kept up)
        }
        self.steps.append(evidence)
        verdict = "pass" if passed else ("undecided" if undecided else "fail") + ": " + "; ".join(told)
        self.stage = "drain"
        self.drain = Drain(elapsed, run.backlog, self.s.drain_stall_seconds, self.s.drain_timeout_seconds)
        sets = [("producerRate", "0")]
        if workload.consumer_proc_ms_max > 0:  # as it is now: a --modify during the run counts
            self.processing = (workload.consumer_proc_ms_min, workload.consumer_proc_ms_max)
            sets += [("consumerProcMsMin", "0"), ("consumerProcMsMax", "0")]
        return PlanStep(sets=sets, note=f"step {evidence['step']} at {self.rate:g} msg/s: {verdict}; draining")

    def _draining(self, elapsed: float, run: RunView) -> PlanStep:
        backlog, drain = run.backlog, self.drain
        assert drain is not None  # the stage is "drain" only once a drain has started
        outcome = drain.outcome(elapsed, backlog)
        if outcome is None:
            return PlanStep()
        self.steps[-1]["drain"] = {
            "outcome": outcome,
            "seconds": round(elapsed - drain.started, 2),
            "backlog_before": drain.backlog,
            "backlog_after": backlog,
        }
        if outcome != "drained":  # the next step would be judged on this one's records: stop here
            step = self._finish(f"the drain after step {len(self.steps)} {outcome} at a backlog of {backlog:,}")
        elif self.stopped:
            step = self._finish(self.stopped)
        else:
            step = self._next_rate(elapsed, run)
        note = f"drain {outcome} after {elapsed - drain.started:.1f} s (backlog {backlog:,})"
        step.note = f"{note}; {step.note}" if step.note else note
        step.evidence = {"plan": self.name, **self.steps[-1]}
        return step

    def _finish(self, stopped: str = "") -> PlanStep:
        limit = self.search.limit
        if stopped:
            self.verdict = f"stopped: {stopped}" + (f"; the limit so far {limit:g} msg/s" if limit else "")
            if limit and self.search.unconfirmed(limit):
                self.verdict += " (passed once, not confirmed)"
        elif len(self.steps) >= self.s.max_steps and self.search.next_rate() is not None:
            self.verdict = f"maxSteps ({self.s.max_steps}) reached before the search converged"
        elif limit is None:
            self.verdict = f"no rate down to minRate {self.s.min_rate:g} msg/s held the target"
        else:
            self.verdict = f"limit {limit:g} msg/s"
            failed = self.search.lowest_failed
            if failed is not None:
                self.verdict += f" (failed at {failed:g})"
            elif limit >= self.s.max_rate:
                self.verdict += " (maxRate: the real limit may be higher)"
        self.verdict += self._workers_waited()
        return PlanStep(sets=self._restore(), done=True, note=self.verdict)

    def _workers_waited(self) -> str:
        """Failed steps in which a worker's threads waited to run (wake_lag.py): their failure may be
        dimster's worker rather than Kafka."""
        waited = [s for s in self.steps if s["passed"] is False and (s["worker_wait_share"] or 0) >= WAITING_NOTED]
        if not waited:
            return ""
        most = max(s["worker_wait_share"] for s in waited)
        return (
            f"; in {len(waited)} of the failed steps a worker's threads waited to run (up to {most:.0%} of the "
            "step): the limit may be the workers', not Kafka's; spread the clients over more workers or hosts"
        )

    def result(self, totals: dict | None = None, run: RunView | None = None) -> dict:
        return {
            "type": self.name,
            "limit_msgs_per_s": self.search.limit,
            "lowest_failed_msgs_per_s": self.search.lowest_failed,
            "target_e2e_p99_ms": self.s.target_e2e_p99_ms,
            "verdict": self.verdict or "interrupted before the search ended",
            "step_count": len(self.steps),
            "steps": self.steps,
        }
