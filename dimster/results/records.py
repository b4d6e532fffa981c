"""The files a run writes, as types: run.json (`RunJson`) and summary/summary.json (`SummaryJson`);
campaign_records.py has a campaign's. The writers are annotated with them, so that mypy checks
every key they write (run.json has one writer, write_run_json), and dimster/schemas.py publishes
them as JSON Schemas (schemas/*.schema.json).

A key written from the start is required; one a run adds as it goes (or that later versions added)
is NotRequired. The schemas leave every object open to keys added later. Maps keyed by a group, a
broker or a metric are `dict[str, X]`. Figures are named in dimster/verdict/figures.py."""

import json
from pathlib import Path
from typing import Any, Literal, NotRequired

# pydantic reads TypedDicts of typing_extensions only, below Python 3.12
from typing_extensions import TypedDict

RunStatus = Literal["running", "completed", "forced", "failed", "crashed"]


# ---- run.json ---------------------------------------------------------------------------------
class Versions(TypedDict):
    """What ran: dimster, Kafka (the cluster's), the client libraries, Java and Python."""

    dimster: str
    kafka: str
    confluent_kafka: str
    librdkafka: str
    java_clients: NotRequired[dict[str, str]]  # role -> kafka-clients version, for roles on Java clients
    java: NotRequired[str]
    jpype: NotRequired[str]
    python: str


class Hardware(TypedDict):
    """The coordinator's host."""

    cpus: int | None
    cpu_model: str
    memory_bytes: int
    platform: str
    hostname: str


class CoordinatorProcess(TypedDict):
    pid: int
    started: float  # seconds since the host's boot (TrackedProcess), or epoch seconds in older bundles


class Totals(TypedDict):
    """The run's records, counted by dimster (see docs/results-format.md). `lost`, `unconsumed` and
    `in_doubt` are null when the groups' positions could not be read at the end."""

    sent: int
    acked: int
    send_errors: int
    received: int
    accepted: int
    released: int
    rejected: int
    duplicates: int
    lost: int | None
    backlog: int
    unconsumed: NotRequired[int | None]
    in_doubt: NotRequired[int | None]
    renewed: NotRequired[int]
    renewals_refused: NotRequired[int]
    lock_timeouts: NotRequired[int]
    ack_errors: NotRequired[int]
    consumer_crashes: NotRequired[int]
    redelivered_after_crash: NotRequired[int]
    archived: NotRequired[int]
    dead_lettered: NotRequired[int | None]  # null without a dead-letter queue
    dead_letter_missing: NotRequired[int | None]
    dead_letter_duplicates: NotRequired[int | None]
    acked_reported: NotRequired[int]  # a crashed run's: what the workers reported acked (`acked` is the log's)
    corrupt: NotRequired[int]  # mode: correctness
    out_of_order: NotRequired[int]


class GroupAccount(TypedDict):
    """Where a group's acknowledged records went: acked = accepted + rejected + archived +
    unconsumed + in_doubt + lost; `closes` when the terms add up (`unaccounted` is the gap)."""

    acked: int
    accepted: int
    rejected: int
    archived: int
    unconsumed: int | None
    in_doubt: int
    lost: int | None
    closes: bool
    unaccounted: int
    dead_lettered: NotRequired[int | None]
    dead_letter_missing: NotRequired[int | None]
    dead_letter_duplicates: NotRequired[int | None]


class LatencyBrief(TypedDict):
    """Count, p50, p99 and max in ms (null when nothing was measured)."""

    count: int
    p50: float | None
    p99: float | None
    max: float | None


class CoordinatorCost(TypedDict):
    cpu_seconds: float
    cpu_share_of_one_core: float | None
    report_lag_ms: LatencyBrief  # its count: the reports taken in while load ran
    report_lines: int  # the workers' lines of those reports (an agent's report has one for each of its workers)
    console_lag_ms: LatencyBrief


class DeadLetterTopic(TypedDict):
    topic: str | None
    copyRecord: bool
    createTopic: bool
    createdBy: str  # dimster, broker or "before the run"


class GroupConfig(TypedDict):
    start: dict[str, str]  # the groups' effective dynamic configs as the run started


class WorkerPlace(TypedDict):
    """Where a worker ran: `pid` for a local process, `address` and `cores` for an agent."""

    index: int
    host: str
    pid: NotRequired[int]
    address: NotRequired[str]
    cores: NotRequired[int]


class ClockOffset(TypedDict):
    offset_ms: float
    uncertainty_ms: float | None
    samples: int


class RunMode(TypedDict):
    """What the workload's mode found: `type` (steady, explore-limits, drain-backlog, correctness)
    and that mode's own figures; correctness adds `passed` and `reasons`."""

    type: str
    passed: NotRequired[bool]
    reasons: NotRequired[list[str]]
    verdict: NotRequired[str]


class BindingLimit(TypedDict):
    """The last diagnosis of a run (None once its groups kept up again): the limit's name
    (`unexplained` when none explains the shortfall) and the rates, msg/s per group."""

    limit: str
    limitRate: float | None
    measured: float
    offered: float


class Diagnosis(TypedDict):
    """One `limit` or `limit_cleared` event (coordinator/loop/limit_watch.py): at which second of load, the
    binding limit (`unexplained` when none explains the shortfall), the rate it allows and the rates
    measured and offered, in msg/s per group."""

    atSeconds: float | None
    event: str
    limit: str | None
    limitRate: float | None
    measured: float | None
    offered: float | None


class PhaseLoad(TypedDict):
    """One phase's load generator (diagnosis/generator.py): its time, the time a worker could not keep
    its schedule, whether that makes it a saturated phase, and each worker's figures."""

    seconds: float
    saturated_seconds: float
    saturated: bool
    workers: dict[str, dict[str, Any]]


class RunJson(TypedDict):
    """run.json: written as the run starts, rewritten as it goes and at its end."""

    run_id: str
    workload: str | None
    environment: str | None
    started: str  # ISO 8601
    command_line: list[str]
    versions: Versions
    hardware: Hardware
    brokers: NotRequired[list[int]]  # the brokers the cluster registered as the run started
    status: RunStatus
    coordinator_process: NotRequired[CoordinatorProcess]
    topics: NotRequired[list[str]]
    groups: NotRequired[dict[str, str]]  # group -> its topic
    deadLetterQueue: NotRequired[DeadLetterTopic]
    groupConfig: NotRequired[GroupConfig]
    limit: NotRequired[BindingLimit | None]  # what limited the share groups as load ended (limit_watch.py)
    generator: NotRequired[dict[str, PhaseLoad]]  # per phase: whether the load generator kept its schedule
    workers: NotRequired[list[WorkerPlace]]
    totals: NotRequired[Totals]
    account: NotRequired[dict[str, GroupAccount]]  # per group
    ended: NotRequired[float]  # epoch seconds
    failure: NotRequired[str | None]
    load_started: NotRequired[float | None]  # epoch seconds
    consumer_assignment_seconds: NotRequired[dict[str, float]]  # per group
    rebalances: NotRequired[dict[str, dict[str, int]]]  # per consumer group: callbacks by kind
    clock_offsets: NotRequired[dict[str, ClockOffset]]  # per worker index
    e2e_ms: NotRequired[LatencyBrief]
    coordinator: NotRequired[CoordinatorCost]
    final_workload: NotRequired[dict[str, Any]]  # the workload as it ended, live changes applied
    mode: NotRequired[RunMode]
    aborted_by: NotRequired[str | None]  # the threshold (abortOnFail) that stopped the run early
    recovered_from: NotRequired[str]  # "journal": a crashed run's end, recorded by `dimster summarize`


# ---- summary/summary.json -----------------------------------------------------------------------
class Throughput(TypedDict):
    """The measured phase: its seconds and its rates (absent when it had no seconds)."""

    seconds: float
    produced_msgs_per_s: NotRequired[float | None]
    produced_mb_per_s: NotRequired[float | None]
    consumed_msgs_per_s: NotRequired[float | None]
    consumed_mb_per_s: NotRequired[float | None]


class Percentiles(TypedDict):
    """A latency's count and percentiles over the measured phase, in ms, merged from histograms (within 1%)."""

    count: int
    p50: float | None
    p75: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p99_9: float | None
    p99_99: float | None
    max: float | None


class Polls(TypedDict):
    polls: int
    records_per_poll: float | None
    max_records_in_a_poll: int | None


class GroupLag(TypedDict):
    """A group's lag as its brokers report it: at the last reading, at most, and dimster's backlog at most."""

    end: int
    max: int
    backlog_max: int | None


class BrokerLagTotal(TypedDict):
    """The brokers' lag summed over the run's groups in the measured phase."""

    max: int
    end: int
    readings: int


class Backlog(TypedDict):
    """Acknowledged records not yet settled, summed over groups, in the measured phase."""

    max: int
    end: int


class ThresholdResult(TypedDict):
    """A threshold judged: `value` is its left side, `bound` its right side, both in `unit`; `passed`
    is null when it is undecided (a saturated load generator), `note` says why."""

    threshold: str
    figures: dict[str, float | None]  # every figure it names, with its value
    value: float | None
    bound: float | None
    unit: str  # ms, msg/s, MB/s, or "" for numbers
    passed: bool | None
    abortOnFail: bool
    note: str | None  # why there is no value, or why it is undecided


class Verdict(TypedDict):
    """The workload's thresholds judged on the measured phase."""

    passed: bool
    aborted_by: str | None  # the threshold (abortOnFail) that stopped the run early
    thresholds: list[ThresholdResult]


class Timeline(TypedDict):
    events: list[dict[str, Any]]  # events.jsonl
    modifications: list[dict[str, Any]]  # modifications.jsonl


class SummaryJson(TypedDict):
    """summary/summary.json: the Spark summary of a run. Keys from run.json are copied as they are;
    the Spark side adds what its tables allow."""

    run: str
    status: RunStatus | None
    totals: Totals | None
    notes: list[str]
    timeline: Timeline
    limits: NotRequired[list[Diagnosis]]
    consumer_assignment_seconds: NotRequired[dict[str, float] | None]
    mode: NotRequired[RunMode | None]
    account: NotRequired[dict[str, GroupAccount] | None]
    dead_letter_queue: NotRequired[DeadLetterTopic | None]
    throughput: NotRequired[Throughput]
    polls: NotRequired[Polls]
    latency_ms: NotRequired[dict[str, Percentiles]]  # per metric: e2e, publish, publish_delay, redelivery
    delivery_counts: NotRequired[dict[str, int]]  # delivery count -> records
    client_stats: NotRequired[dict[str, Any]]  # ratios of the clients' own statistics
    worker_cpu: NotRequired[dict[str, Any]]
    brokers: NotRequired[dict[str, Any]]  # the brokers' metrics: requests, purgatory, share partitions
    compression: NotRequired[dict[str, Any]]
    broker_lag: NotRequired[dict[str, GroupLag]]  # per group
    share_outcomes: NotRequired[dict[str, int | None]]
    broker_lag_total: NotRequired[BrokerLagTotal | None]
    backlog: NotRequired[Backlog | None]
    verdict: NotRequired[Verdict | None]  # null when the workload has no thresholds
    generator: NotRequired[dict[str, PhaseLoad]]  # per phase, from the workers' reports (pipeline/generator.py)


def write_run_json(run_dir: Path, info: RunJson) -> None:
    """run.json written whole (beside, then renamed): the one place that writes it. A run's own
    record goes through ResultsBundle.save_run_info, which masks its secrets first."""
    tmp = run_dir / "run.json.tmp"
    tmp.write_text(json.dumps(info, indent=2, default=str))
    tmp.replace(run_dir / "run.json")
