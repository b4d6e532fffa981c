"""`dimster tune` on a running share-group workload: the model's next step (tuning/plan.py) from what the
run measures now, applied through the run's control API (the same path as `dimster run --modify`), then
measured once the rates since the change have settled, and compared with its prediction. While the
model explains the run (measured within TOLERANCE of predicted), the next step is the model's again;
once it does not, the tuner says so and searches by measurement over the levers left (each lever's
next value in order of cost, kept only when the measured rate rises), never naming a cause it did not
see. It ends when the goals hold, measured and with the model's margin (measured alone once the model
does not explain the run), or says which goal cannot be met and which limit stops it."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from dimster.diagnosis.limits import TOLERANCE
from dimster.errors import DimsterError
from dimster.tuning.levers import BATCH_SIZE_KEY, Lever, after_step
from dimster.tuning.plan import (
    MAX_STEPS,
    MET,
    Step,
    changes_of,
    consumed,
    next_step,
    offered,
    planned,
    predict,
    redeploy_for,
    with_values,
)
from dimster.verdict.expressions import Comparison
from dimster.workload.model import Workload

SETTLE_SECONDS = 10.0  # after a change, before its rates are read (consumers join, fetches fill)
MEASURE_SECONDS = 10.0  # then the consumption is averaged over this long
LOAD_PHASES = ("warmup", "measure")
RISE = 0.05  # a measured search keeps a change that lifts the rate by more than this share
REMEASURES = 3  # measurements taken again because dimster's own workers, not Kafka, held the rate


class RunControl(Protocol):
    """The running workload, as `dimster status --json` and `dimster run --modify` see it; the tuner's
    steps become the run's events (`tell`)."""

    def status(self) -> dict: ...

    def modify(self, pairs: list[tuple[str, str]]) -> dict: ...

    def redeploys(self) -> tuple[int, int]:
        """The run's broker redeploys so far: (done, failed)."""
        ...


@dataclass
class Taken:
    """A step pulled on the run: what the model (or the search) expected, and what was measured."""

    step: Step
    measured: float | None = None
    by: str = "model"  # or "search": a measured search's trial
    kept: bool = True
    drain: float = 0.0  # msg/s the groups may consume above the prediction while they drain a backlog

    @property
    def explained(self) -> bool:
        return self.measured is not None and explains(self.step.predicted, self.drain, self.measured)


def explains(predicted: float, drain: float, measured: float) -> bool:
    """Whether `measured` is within TOLERANCE of `predicted`, or of a rate up to `drain` above it (what
    the limits allow beyond the offered rate while the groups work off a backlog)."""
    return predicted * (1 - TOLERANCE) <= measured <= (predicted + drain) * (1 + TOLERANCE)


@dataclass
class Tuned:
    taken: list[Taken] = field(default_factory=list)
    met: bool = False
    reason: str = ""
    limit: str = ""
    measured: float = 0.0

    @property
    def changes(self) -> dict[str, int | str]:
        return changes_of([t.step for t in self.taken if t.kept])


def measured_holds(goals: list[Comparison], status: dict) -> bool:
    """Whether every goal holds on the run's live figures (one without a value yet does not)."""
    return all(g.judge(status.get("figures") or {})[2] for g in goals)


class LiveTuner:
    def __init__(
        self,
        control: RunControl,
        w: Workload,
        goals: list[Comparison],
        levers: list[Lever],
        values: dict[str, int | str],
        tell: Callable[[str, str], None] = lambda _event, line: print(line),
        settle_seconds: float = SETTLE_SECONDS,
        measure_seconds: float = MEASURE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        timeout: float = 300.0,
    ):
        self.control, self.w, self.goals, self.levers, self.values = control, w, goals, levers, dict(values)
        self.tell, self.clock, self.sleep, self.timeout = tell, clock, sleep, timeout
        self.settle_seconds, self.measure_seconds = settle_seconds, measure_seconds

    def run(self) -> Tuned:
        result = Tuned()
        status = self._settled(self.clock())
        searching = not self._explains(status)
        while len(result.taken) < MAX_STEPS:
            result.measured = status["consRate"]
            step, why, result.limit = next_step(self.w, self.goals, self.levers, self.values, self._seen(status))
            if measured_holds(self.goals, status) and (why == MET or searching):  # searching: measured alone
                said = MET if why == MET else "the model does not explain this run"
                result.met, result.reason = True, f"the goals hold, measured ({result.measured:,.0f} msg/s); {said}"
                return result
            if searching or (step is None and why == MET):  # the model says met, the run says not
                step = self._search(result)
                searching = True
            if step is None:
                result.reason = why if why and why != MET else "no allowed change lifts the measured rate"
                return result
            taken = Taken(step, by="search" if searching else "model")
            result.taken.append(taken)
            status = self._pull(taken, status["backlog"])
            if not searching and not taken.explained:
                self.tell(
                    "tune_model_off",
                    f"the model does not explain this run: {step.lever} {step.before} -> {step.after} was predicted "
                    f"to give {step.predicted:,.0f} msg/s and gave {taken.measured:,.0f}; searching by measurement",
                )
                searching = True
        result.reason = f"not met within {MAX_STEPS} steps"
        return result

    def _explains(self, status: dict) -> bool:
        """Whether the model's prediction for the settings now is within TOLERANCE of the rate measured;
        says so when it is not."""
        allowed = predict(self.w, self.values, self._seen(status))[0]
        predicted = consumed(self.w, allowed)
        if explains(predicted, self._drain(allowed, status["backlog"]), status["consRate"]):
            return True
        self.tell(
            "tune_model_off",
            f"the model does not explain this run: it predicts {predicted:,.0f} msg/s for its settings, and "
            f"{status['consRate']:,.0f} were measured; searching by measurement",
        )
        return False

    def _drain(self, allowed: float, backlog: int) -> float:
        """What the groups may consume above the offered rate while they work off `backlog` records: at
        most what the limits allow beyond it, and at most the whole backlog within one measurement."""
        return max(0.0, min(allowed - offered(self.w), backlog / self.measure_seconds))

    def _seen(self, status: dict) -> dict:
        """The run's status with the batch.size its producers' batches were measured at."""
        return {**status, "batchSize": self.values[BATCH_SIZE_KEY]}

    def _pull(self, taken: Taken, backlog: int) -> dict:
        """Apply the step, wait for the rates to settle, measure; a search's step that does not raise the
        rate is put back. `backlog`: the records not yet settled before it, which the groups may drain."""
        step = taken.step
        if step.redeploy:
            self._redeploy(step)
        before = self.clock()
        self.control.modify([(step.lever, str(step.after))])
        self.values[step.lever] = step.after
        self.w = with_values(self.w, {step.lever: step.after})
        status = self._settled(before)
        taken.drain = self._drain(predict(self.w, self.values, self._seen(status))[0], backlog)
        taken.measured = status["consRate"]
        if taken.by == "search" and taken.measured <= step.predicted_before * (1 + RISE):
            taken.kept = False
            self.control.modify([(step.lever, str(step.before))])
            self.values[step.lever] = step.before
            self.w = with_values(self.w, {step.lever: step.before})
            status = self._settled(self.clock())
        if taken.by == "model":
            up_to = f" (up to {step.predicted + taken.drain:,.0f} while a backlog drains)" if taken.drain else ""
            told = f"predicted {step.predicted:,.0f} msg/s{up_to}, measured {taken.measured:,.0f} ({step.why})"
        else:
            kept = "kept" if taken.kept else "put back"
            told = f"measured {taken.measured:,.0f} msg/s against {step.predicted_before:,.0f} before: {kept}"
        self.tell("tune_step", f"{taken.by}: {step.lever} {step.before} -> {step.after}: {told}")
        return status

    def _redeploy(self, step: Step) -> None:
        """Set the brokers' config the step needs through the run (a broker redeploy, as `--modify
        --set brokerConfig.KEY=VALUE` makes one) and wait until the run says it is done."""
        done, failed = self.control.redeploys()
        told = " ".join(f"{key}={value}" for key, value in step.redeploy.items())
        self.tell("tune_redeploy", f"{step.lever} {step.after} takes a broker redeploy first: {told}")
        self.control.modify([(key, str(value)) for key, value in step.redeploy.items()])
        deadline, what = self.clock() + self.timeout, f"the broker redeploy for {step.lever} {step.after}"
        while (now := self.control.redeploys())[0] <= done:
            if now[1] > failed:
                raise DimsterError(f"{what} failed (the run's events say why)")
            if self.clock() > deadline:
                raise DimsterError(f"{what} took over {self.timeout:g} s")
            self.sleep(1.0)
        self.levers = after_step(self.levers, step.lever, step.after)

    def _search(self, result: Tuned) -> Step | None:
        """The next trial of a measured search: the cheapest next value of a lever not yet tried (its next
        value up the range, or the next choice), from the measured rate now."""
        tried = {(t.step.lever, t.step.after) for t in result.taken}
        options = []
        for lever in self.levers:
            now = self.values[lever.key]
            after = [v for v in lever.candidates(now) if (lever.key, v) not in tried]
            ahead = [v for v in after if not lever.numeric or int(v) > int(now)]
            if ahead:
                options.append((lever.cost_of(now, ahead[0]), lever, ahead[0]))
        if not options:
            return None
        cost, lever, value = min(options, key=lambda option: option[0])
        rate, now = result.measured, self.values[lever.key]
        return Step(result.limit, lever.key, now, value, rate, rate * (1 + RISE), cost, "", redeploy_for(lever, value))

    def _settled(self, since: float) -> dict:
        """The run's status once the change at `since` has settled: after `settle_seconds`, with its
        consumption averaged over the next `measure_seconds` of statuses (a share consumer takes a fetch
        at a time, so one status's rate is a fetch more or less than the rate that holds). A status that
        says the load generator was saturated starts the settling and the measurement again, up to
        REMEASURES times: the rate then measured dimster's workers, not Kafka."""
        samples: list[float] = []
        measure_from, deadline, again = since + self.settle_seconds, since + self.timeout, 0
        while True:
            status = self.control.status()
            if status.get("phase") not in LOAD_PHASES:
                raise DimsterError(f"the run is {status.get('phase')}: it ended before the tuner did")
            now = self.clock()
            if now >= measure_from and status.get("rateSeconds"):
                if status.get("generatorSaturated") and again < REMEASURES:
                    again += 1
                    samples, measure_from = [], now + self.settle_seconds
                    self.tell(
                        "tune_remeasure",
                        f"the load generator was saturated while measuring ({status['generatorSaturated']} "
                        f"worker(s)): measuring again ({again} of {REMEASURES})",
                    )
                else:
                    samples.append(status["consRate"])
                    if now >= measure_from + self.measure_seconds:
                        return {**status, "consRate": sum(samples) / len(samples)}
            if now > deadline:
                raise DimsterError(f"the run's rates did not settle within {self.timeout:g} s")
            self.sleep(1.0)


def unplanned(goals: list[Comparison]) -> list[str]:
    """Goals only a run measures (the model does not predict them)."""
    return [g.text for g in goals if not planned(g)]
