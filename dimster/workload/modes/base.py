"""What every run mode's module offers, and the types its plan works with.

A plan steers a run while load flows: it looks at the run every loop pass and answers with live
changes to make (applied through the same `modify` as `dimster run --modify`, so each lands in
modifications.jsonl and on the report's timeline, marked with the plan's name) and whether the load
phase is over. Plans judge the run through a `RunView` (the coordinator's aggregate) and keep their
evidence, which the coordinator writes into run.json's `mode` and the events."""

from dataclasses import dataclass, field
from typing import Any, Protocol

from dimster.diagnosis.generator import WorkerLoad
from dimster.metrics.histogram import Histogram


class Workload(Protocol):
    """The workload's settings a mode reads (workload/model.py's Workload has them all)."""

    @property
    def mode(self) -> Any: ...
    @property
    def warmup_seconds(self) -> float: ...
    @property
    def duration_seconds(self) -> float: ...
    @property
    def drain_timeout_seconds(self) -> float: ...
    @property
    def message_size(self) -> int: ...
    @property
    def producer_rate(self) -> float: ...
    @property
    def producer_rate_schedule(self) -> Any: ...
    @property
    def consumer_proc_ms_min(self) -> float: ...
    @property
    def consumer_proc_ms_max(self) -> float: ...
    @property
    def consumer_type(self) -> str: ...
    @property
    def total_producers(self) -> int: ...
    @property
    def total_consumers(self) -> int: ...


@dataclass
class Panel:
    """A mode's table in the report: one row per step, each column's values of one kind."""

    headers: list[str]
    kinds: list[str]  # per column: integer | decimal | text
    rows: list[list[Any]]


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
    acked: float = 0.0  # msg/s acknowledged by the brokers, over every topic a group reads
    generator: list[WorkerLoad] = field(default_factory=list)  # the workers that could not keep their schedule


@dataclass
class ReceiveSpan:
    """Records received since a mark, and when (epoch s) the first and last of them arrived."""

    received: int = 0
    first: float = 0.0
    last: float = 0.0


class RunView(Protocol):
    load_started: float
    corrupt: int  # records whose body failed its checksum (correctness)
    out_of_order: int  # records received before an earlier one of their partition (correctness)

    @property
    def backlog(self) -> int:
        """Acknowledged records not yet settled."""

    def take_probe(self) -> Probe: ...

    def mark_receiving(self) -> None: ...

    def receiving(self) -> ReceiveSpan: ...


class RunPlan(Protocol):
    name: str

    def step(self, elapsed: float, workload: Workload, run: RunView) -> PlanStep:
        """`elapsed`: seconds since load started; `workload`: as it is now (live changes included);
        `run`: the run's numbers so far."""

    def result(self, totals: dict | None = None, run: RunView | None = None) -> dict | None:
        """What the plan found, for run.json's `mode` (None for a plain run). At the end of the run it
        is given the run's totals and numbers: a plan may add to the totals and judge them."""


class SteadyPlan:
    """A plain run: load for warmupSeconds + durationSeconds."""

    name = "steady"
    runs_its_duration = True  # ends at warm-up + duration (planned_seconds)

    def step(self, elapsed: float, workload: Workload, run: RunView) -> PlanStep:
        # read every pass: durationSeconds and warmupSeconds can change live; 0 runs until stopped
        end = workload.warmup_seconds + workload.duration_seconds if workload.duration_seconds else float("inf")
        return PlanStep(done=elapsed >= end)

    def result(self, totals: dict | None = None, run: RunView | None = None) -> dict | None:
        return None


def planned_seconds(plan: object, workload: Workload) -> float | None:
    """How long `plan` loads for, where that is known in advance: warm-up and duration for a plan that
    runs its duration; None for one that searches, or a run until stopped (durationSeconds 0)."""
    if not getattr(plan, "runs_its_duration", False) or not workload.duration_seconds:
        return None
    return workload.warmup_seconds + workload.duration_seconds


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
