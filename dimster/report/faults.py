"""Throughput, latency and backlog around each fault of a run: in the seconds before it, while it
lasts and after its heal, read from the per-second series the report's charts draw, so a fault's
figures are those of the charts and no new measurement is made. Each window also has the longest
stretch without consumption, the stall docs/faults.md measures.

Windows are whole seconds of run time (the per-second tables' `second` s covers [s, s+1)):
- during: from the second in which the fault began to the second in which its heal was done (a killed
  node registered again, a paused one resumed), both included; for a restart, which heals itself, or
  a heal whose fault is not in the run, the step's own time; for a fault never healed, to the end of
  the run's data;
- before: the WINDOW_SECONDS seconds before `during`; after: the WINDOW_SECONDS seconds after it.
Every window is clipped to the run's data, and is None when nothing is left of it."""

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from dimster.report.data import RunData
from dimster.workload.model import HEALS

WINDOW_SECONDS = 10  # whole seconds before a fault and after its heal


@dataclass(frozen=True)
class Step:
    """A `fault` event: `action` on `node`, begun `at` seconds after load started, done `seconds` later
    (unknown for a step taken from another terminal)."""

    at: float
    node: Any
    action: str
    seconds: float | None = None

    @property
    def done(self) -> float:
        return self.at + (self.seconds or 0.0)

    @property
    def label(self) -> str:
        return f"node {self.node} {self.action}"


@dataclass(frozen=True)
class FailedStep:
    """A `fault_failed` event: a step that could not happen."""

    at: float | None
    node: Any
    action: str
    message: str


@dataclass(frozen=True)
class Window:
    start: int  # the first second of run time in the window
    end: int  # the second after its last
    produced: float | None  # msg/s
    consumed: float | None  # msg/s
    e2e_p99_ms: float | None  # the highest per-second end-to-end p99
    backlog: float | None  # the highest per-second backlog (acknowledged, not yet consumed)
    brokers_lag: float | None  # the highest lag the brokers reported, summed over groups (every 5 s)
    without_consumption: int | None  # the longest stretch of seconds in which nothing was consumed


@dataclass(frozen=True)
class AroundFault:
    """One fault step, its heal if it needs one, and the figures around it."""

    step: Step
    heal: Step | None
    before: Window | None
    during: Window | None
    after: Window | None
    overlapping: list[Step] = field(default_factory=list)  # other faults in effect during this one

    @property
    def needs_heal(self) -> bool:
        return self.step.action in HEALS


@dataclass(frozen=True)
class Series:
    """The per-second series of a run, by second of run time, over seconds [first, end). A second the
    throughput table lacks is one in which no client reported anything: nothing produced or consumed."""

    first: int
    end: int
    sent: dict[int, float] | None  # None: no throughput table
    received: dict[int, float] | None
    backlog: dict[int, float]
    e2e_p99: dict[int, float]
    lag: list[tuple[float, float]]  # (run time, the brokers' lag summed over groups)


def had_faults(run: RunData) -> bool:
    return any(event.get("event") in ("fault", "fault_failed") for event in run.timeline.get("events", []))


def fault_steps(run: RunData) -> list[Step]:
    """The run's `fault` events (faults and heals) that can be placed in run time, in time order."""
    found = []
    for event in run.timeline.get("events", []):
        at = run.run_time(event.get("began", event.get("time")))
        if event.get("event") == "fault" and at is not None:
            seconds = None if event.get("seconds") is None else float(event["seconds"])
            found.append(Step(at, event.get("node"), str(event.get("action")), seconds))
    return sorted(found, key=lambda step: step.at)


def failed_steps(run: RunData) -> list[FailedStep]:
    return [
        FailedStep(run.run_time(e.get("time")), e.get("node"), str(e.get("action")), str(e.get("message", "")))
        for e in run.timeline.get("events", [])
        if e.get("event") == "fault_failed"
    ]


def with_heals(steps: list[Step]) -> list[tuple[Step, Step | None]]:
    """Each fault with the first later step on its node that heals it; a heal taken by a fault has no
    row of its own. Restarts, and heals whose fault is not in the run, stand alone."""
    taken: set[int] = set()
    pairs = []
    for index, step in enumerate(steps):
        if index in taken:
            continue
        heal = None
        if step.action in HEALS:
            for later in range(index + 1, len(steps)):
                candidate = steps[later]
                if later not in taken and candidate.action == HEALS[step.action] and candidate.node == step.node:
                    taken.add(later)
                    heal = candidate
                    break
        pairs.append((step, heal))
    return pairs


def around_faults(run: RunData, window_seconds: int = WINDOW_SECONDS) -> list[AroundFault]:
    """Every fault step of the run with the figures before, during and after it."""
    data = series(run)
    spans = []  # (step, heal, the seconds [first, end) of `during`, whether it ended within the run)
    for step, heal in with_heals(fault_steps(run)):
        first = math.floor(step.at)
        done = (heal.done if heal else None) if step.action in HEALS else step.done
        end = data.end if done is None else max(math.ceil(done), first + 1)
        spans.append((step, heal, first, end, done is not None))
    found = []
    for step, heal, first, end, ended in spans:
        overlapping = [
            other for other, _, start, stop, _ in spans if other is not step and start < end and first < stop
        ]
        before, during = window(data, first - window_seconds, first), window(data, first, end)
        after = window(data, end, end + window_seconds) if ended else None
        found.append(AroundFault(step, heal, before, during, after, overlapping))
    return found


def series(run: RunData) -> Series:
    throughput = run.table("throughput_per_second")
    latency = run.table("latency_per_second")
    seconds = [int(s) for table in (throughput, latency) if table is not None for s in table["second"]]
    e2e_p99 = {} if latency is None else _by_second(latency[latency["metric"] == "e2e"], "p99")
    lag: list[tuple[float, float]] = []
    lag_table = run.table("broker_lag")
    if lag_table is not None:
        summed = lag_table.groupby("run_time_s", as_index=False)["lag"].sum()  # as the backlog chart
        lag = [(float(t), float(v)) for t, v in zip(summed["run_time_s"], summed["lag"], strict=True)]
    return Series(
        first=min(seconds, default=0),
        end=max(seconds, default=-1) + 1,
        sent=None if throughput is None else _by_second(throughput, "sent"),
        received=None if throughput is None else _by_second(throughput, "received"),
        backlog={} if throughput is None else _by_second(throughput, "backlog"),
        e2e_p99=e2e_p99,
        lag=lag,
    )


def window(data: Series, start: int, end: int) -> Window | None:
    """The figures of seconds [start, end) that the run's data covers; None when it covers none."""
    start, end = max(start, data.first), min(end, data.end)
    if end <= start:
        return None
    seconds = range(start, end)

    def rate(values: dict[int, float] | None) -> float | None:
        return None if values is None else sum(values.get(s, 0.0) for s in seconds) / len(seconds)

    def highest(values: dict[int, float]) -> float | None:
        return max((values[s] for s in seconds if s in values), default=None)

    return Window(
        start,
        end,
        produced=rate(data.sent),
        consumed=rate(data.received),
        e2e_p99_ms=highest(data.e2e_p99),
        backlog=highest(data.backlog),
        brokers_lag=max((lag for at, lag in data.lag if start <= at < end), default=None),
        without_consumption=None if data.received is None else longest_idle(data.received, seconds),
    )


def longest_idle(received: dict[int, float], seconds: range) -> int:
    """The longest stretch of consecutive `seconds` in which nothing was received."""
    longest = current = 0
    for second in seconds:
        current = current + 1 if received.get(second, 0.0) == 0 else 0
        longest = max(longest, current)
    return longest


def _by_second(table: pd.DataFrame, column: str) -> dict[int, float]:
    if column not in table:
        return {}
    return {int(s): float(v) for s, v in zip(table["second"], table[column], strict=True) if not pd.isna(v)}
