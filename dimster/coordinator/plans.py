"""Run plans: what steers a run while load flows. A plan looks at the run every loop pass and answers
with live changes to make (applied through the same `modify` as `dimster run --modify`, so each lands
in modifications.jsonl and on the report's timeline, marked with the plan's name) and whether the
load phase is over. `SteadyPlan` is a plain run; `ExploreLimitsPlan` searches the highest rate that
holds a latency target; `DrainBacklogPlan` builds a backlog with consumers paused and times its drain.

Plans judge the run through a `RunView` (the coordinator's aggregate) and keep their evidence, which
the coordinator writes into run.json's `mode` and the events."""

import math
from dataclasses import dataclass, field
from typing import Protocol

from dimster.metrics.histogram import Histogram
from dimster.metrics.schema import WAITING_NOTED
from dimster.workload.model import DrainBacklog, ExploreLimits, Workload


@dataclass
class PlanStep:
    sets: list[tuple[str, str]] = field(default_factory=list)  # live changes to apply now
    done: bool = False  # the load phase is over: stop producers, drain, close
    note: str = ""  # why, for the console and the events
    evidence: dict | None = None  # a judged step or a finished drain, kept as an event


@dataclass
class Probe:
    """What the reports since the previous `take_probe()` carried. Rates are summed over workers, each
    worker's counts divided by the time its own reports covered: producers and consumers of a worker
    are counted over the same span, so their difference is the backlog's growth, free of report timing."""

    seconds: float
    published: float  # msg/s handed to the producers
    consumed: float  # msg/s settled by the group that fell furthest behind
    behind: float  # msg/s by which that group's backlog grew (acknowledged minus settled), at least 0
    e2e: Histogram
    worker_wait_share: float | None = None  # the largest share of the time a worker's threads waited to run


@dataclass
class ReceiveSpan:
    """Records received since a mark, and when (epoch s) the first and last of them arrived."""

    received: int = 0
    first: float = 0.0
    last: float = 0.0


class RunView(Protocol):
    load_started: float
    backlog: int  # acknowledged records not yet settled

    def take_probe(self) -> Probe: ...

    def mark_receiving(self) -> None: ...

    def receiving(self) -> ReceiveSpan: ...


class RunPlan(Protocol):
    name: str

    def step(self, elapsed: float, workload: Workload, run: RunView) -> PlanStep:
        """`elapsed`: seconds since load started; `workload`: as it is now (live changes included);
        `run`: the run's numbers so far."""

    def result(self) -> dict | None:
        """What the plan found, for run.json's `mode` (None for a plain run)."""


class SteadyPlan:
    name = "steady"

    def step(self, elapsed: float, workload: Workload, run: RunView) -> PlanStep:
        # read every pass: durationSeconds and warmupSeconds can change live; 0 runs until stopped
        end = workload.warmup_seconds + workload.duration_seconds if workload.duration_seconds else float("inf")
        return PlanStep(done=elapsed >= end)

    def result(self) -> dict | None:
        return None


def plan_for(workload: Workload) -> RunPlan:
    mode = workload.mode
    if isinstance(mode, ExploreLimits):
        return ExploreLimitsPlan(mode, workload)
    if isinstance(mode, DrainBacklog):
        return DrainBacklogPlan(mode, workload)
    return SteadyPlan()


# ---- explore-limits -------------------------------------------------------------------------------
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
        if failed is None:  # ramp up
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

    def _confirmed(self, limit: float) -> float | None:
        passes = sum(1 for r, ok in self.verdicts if ok and r == limit)
        return limit if self.confirm and passes < 2 else None


def _round_rate(rate: float) -> float:
    """Rates to three significant digits, so that the timeline reads 812 msg/s, not 812.3046875."""
    if rate <= 0:
        return rate
    digits = 2 - math.floor(math.log10(rate))
    return round(rate, max(digits, 0))


@dataclass
class Drain:
    """Between steps, or the drain of drain-backlog: ends when the backlog reaches `empty_at`, stops
    falling for `stall_seconds`, or takes `timeout_seconds` — never hangs."""

    started: float
    backlog: int
    stall_seconds: float
    timeout_seconds: float
    empty_at: int = 0
    best: int = 0
    best_at: float = 0.0

    def __post_init__(self):
        self.best, self.best_at = self.backlog, self.started

    def outcome(self, elapsed: float, backlog: int) -> str | None:
        """None while the drain goes on; else drained, stalled or timed out."""
        if backlog <= self.empty_at:
            return "drained"
        if backlog < self.best:
            self.best, self.best_at = backlog, elapsed
        if elapsed - self.best_at >= self.stall_seconds:
            return "stalled"
        if elapsed - self.started >= self.timeout_seconds:
            return "timed out"
        return None


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
        rate = self.search.next_rate() if len(self.steps) < self.s.max_steps else None
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
        reasons = []
        if published < self.s.min_rate_achieved * self.rate:
            reasons.append(f"producers reached {published:.0f} of {self.rate:g} msg/s")
        if p99 is None:
            reasons.append("no record was consumed")
        elif p99 / 1000 > self.s.target_e2e_p99_ms:
            reasons.append(f"e2e p99 {p99 / 1000:.1f} ms over the target {self.s.target_e2e_p99_ms:g} ms")
        if probe.behind > self.s.max_backlog_growth * self.rate:
            reasons.append(f"consumers fell behind: the backlog grew {probe.behind:.0f} msg/s")
        passed = not reasons
        self.search.record(self.rate, passed)
        evidence = {
            "step": len(self.steps) + 1,
            "rate": self.rate,
            "passed": passed,
            "reasons": reasons,
            "judged_seconds": round(seconds, 2),
            "published_msgs_per_s": round(published, 1),
            "consumed_msgs_per_s": round(consumed, 1),
            "e2e_p50_ms": None if p50 is None else round(p50 / 1000, 2),
            "e2e_p99_ms": None if p99 is None else round(p99 / 1000, 2),
            "backlog_growth_msgs_per_s": round(probe.behind, 1),
            "backlog_start": self.backlog_at_judge,
            "backlog_end": run.backlog,
            "worker_wait_share": None if probe.worker_wait_share is None else round(probe.worker_wait_share, 3),
        }
        self.steps.append(evidence)
        verdict = "pass" if passed else "fail: " + "; ".join(reasons)
        self.stage = "drain"
        self.drain = Drain(elapsed, run.backlog, self.s.drain_stall_seconds, self.s.drain_timeout_seconds)
        sets = [("producerRate", "0")]
        if workload.consumer_proc_ms_max > 0:  # as it is now: a --modify during the run counts
            self.processing = (workload.consumer_proc_ms_min, workload.consumer_proc_ms_max)
            sets += [("consumerProcMsMin", "0"), ("consumerProcMsMax", "0")]
        return PlanStep(sets=sets, note=f"step {evidence['step']} at {self.rate:g} msg/s: {verdict}; draining")

    def _draining(self, elapsed: float, run: RunView) -> PlanStep:
        backlog = run.backlog
        outcome = self.drain.outcome(elapsed, backlog)
        if outcome is None:
            return PlanStep()
        self.steps[-1]["drain"] = {
            "outcome": outcome,
            "seconds": round(elapsed - self.drain.started, 2),
            "backlog_before": self.drain.backlog,
            "backlog_after": backlog,
        }
        if outcome != "drained":  # the next step would be judged on this one's records: stop here
            step = self._finish(f"the drain after step {len(self.steps)} {outcome} at a backlog of {backlog:,}")
        else:
            step = self._next_rate(elapsed, run)
        note = f"drain {outcome} after {elapsed - self.drain.started:.1f} s (backlog {backlog:,})"
        step.note = f"{note}; {step.note}" if step.note else note
        step.evidence = {"plan": self.name, **self.steps[-1]}
        return step

    def _finish(self, stopped: str = "") -> PlanStep:
        limit = self.search.limit
        if stopped:
            self.verdict = f"stopped: {stopped}" + (f"; the limit so far {limit:g} msg/s" if limit else "")
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
        waited = [s for s in self.steps if not s["passed"] and (s["worker_wait_share"] or 0) >= WAITING_NOTED]
        if not waited:
            return ""
        most = max(s["worker_wait_share"] for s in waited)
        return (
            f"; in {len(waited)} of the failed steps a worker's threads waited to run (up to {most:.0%} of the "
            "step): the limit may be the workers', not Kafka's; spread the clients over more workers or hosts"
        )

    def result(self) -> dict:
        return {
            "type": self.name,
            "limit_msgs_per_s": self.search.limit,
            "lowest_failed_msgs_per_s": self.search.lowest_failed,
            "target_e2e_p99_ms": self.s.target_e2e_p99_ms,
            "verdict": self.verdict or "interrupted before the search ended",
            "step_count": len(self.steps),
            "steps": self.steps,
        }


# ---- drain-backlog --------------------------------------------------------------------------------
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

    def result(self) -> dict:
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
