"""What limits a share group's consumption, as pure functions of what a run measures over one window.
Each limit predicts the rate it allows, from its inputs and a formula a person can check by hand
(shared seed 001: ceil(2,000 locks / 64-record batches) = 32 busy consumers per partition, x 200 msg/s
x 6 partitions = 38,400 msg/s; the post's floor gives 31 and 37,200). A diagnosis names the limit
that allows the least, and only when that prediction is within TOLERANCE of the measured rate;
otherwise the shortfall is unexplained."""

import math
from dataclasses import dataclass, field

from dimster.diagnosis.generator import LEVERS as GENERATOR_LEVERS
from dimster.diagnosis.generator import sentence

TOLERANCE = 0.15  # a prediction this close to the measured rate (a share of it) explains it
GENERATOR = "load generator"  # dimster itself (diagnosis/generator.py)
DEFAULT_MAX_POLL_RECORDS = 500
DEFAULT_FETCH_MAX_WAIT_MS = 500
LOCK_LEVERS = ("kafkaConfig.producerConfig.batch.size", "groupConfig.share.partition.max.record.locks",
               "kafkaConfig.shareConsumerConfig.share.acquire.mode")  # fmt: skip
PROCESSING_LEVERS = ("consumersPerGroup", "consumerProcParallelism", "consumerProcMsMin/Max")
FETCH_WAIT_LEVERS = ("consumersPerGroup", "kafkaConfig.shareConsumerConfig.share.acquire.mode",
                     "kafkaConfig.shareConsumerConfig.max.poll.records")  # fmt: skip


@dataclass(frozen=True)
class GroupInputs:
    """One share group over one window: its settings as they are now, and what was measured."""

    partitions: int
    consumers: int
    proc_ms: float  # mean processing time per record
    parallelism: int  # consumerProcParallelism: 1 serial, N lanes, -1 the whole poll at once
    max_poll_records: int
    acquire_mode: str  # batch_optimized | record_limit
    record_locks: int  # share.partition.max.record.locks in effect
    records_per_batch: float | None  # the producers' measured records per batch
    records_per_poll: float | None  # the consumers' measured records per poll
    fetch_max_wait_ms: float = DEFAULT_FETCH_MAX_WAIT_MS
    proc_ms_max: float | None = None  # the slowest record's time (uniform up to it); None: all take proc_ms


@dataclass(frozen=True)
class Limit:
    name: str
    rate: float  # msg/s it allows the group
    inputs: dict[str, float | int | str]
    sentence: str  # its numbers and formula, one line
    levers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Diagnosis:
    """Why a group consumes `measured` msg/s of `offered`: `limit` when one explains it, else None
    (unexplained), with every limit computed and any notes on the measurement itself."""

    measured: float
    offered: float
    limit: Limit | None
    limits: tuple[Limit, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def name(self) -> str:
        return self.limit.name if self.limit else "unexplained"

    def line(self) -> str:
        """The console's line."""
        notes = "".join(f"; {n}" for n in self.notes)
        if self.limit:
            levers = f"; levers: {', '.join(self.limit.levers)}" if self.limit.levers else ""
            return f"limit: {self.limit.sentence} (measured {self.measured:,.0f}){levers}{notes}"
        allowed = ", ".join(f"{lim.name} allows {lim.rate:,.0f}" for lim in self.limits) or "no limit computed"
        return (
            f"limit: consumption {self.measured:,.0f} msg/s of {self.offered:,.0f} offered is unexplained "
            f"({allowed}){notes}"
        )


def per_consumer_rate(g: GroupInputs) -> float | None:
    """Records a consumer processes per second (None: no processing time). Serial, or on fewer lanes
    than a poll's records: lanes x 1000 / the mean time. The whole poll at once (parallelism -1, or
    lanes enough for every record): a poll takes its slowest record, whose expected time of n uniform
    times is low + (high - low) x n / (n + 1) (workload/processing.makespan_ms)."""
    if g.proc_ms <= 0:
        return None
    per_poll = g.records_per_poll or g.max_poll_records
    lanes = per_poll if g.parallelism < 0 else min(g.parallelism, per_poll)
    if lanes < per_poll or g.parallelism == 1:
        return lanes * 1000 / g.proc_ms
    high = g.proc_ms if g.proc_ms_max is None else g.proc_ms_max
    low = 2 * g.proc_ms - high
    slowest = low + (high - low) * per_poll / (per_poll + 1)
    return per_poll * 1000 / slowest


def consumers_per_partition(g: GroupInputs) -> int:
    """The share group's assignor spreads members over partitions: more members than partitions share
    each partition; fewer each take several."""
    return max(1, math.ceil(g.consumers / g.partitions))


def acquired_per_fetch(g: GroupInputs) -> float | None:
    """Records one fetch acquires on a partition: whole batches up to max.poll.records in
    batch_optimized (at least one batch), max.poll.records in record_limit."""
    if g.acquire_mode == "record_limit":
        return float(g.max_poll_records)
    if not g.records_per_batch:
        return None
    return math.ceil(g.max_poll_records / g.records_per_batch) * g.records_per_batch


def lock_budget(g: GroupInputs) -> Limit | None:
    """A share-partition acquires for a fetch while fewer than its record locks are in flight, then
    whole batches (Kafka's SharePartition): ceil(locks / records per fetch) fetches hold records at
    once, so that many consumers per partition are busy. None when the budget does not bind."""
    unit, rate = acquired_per_fetch(g), per_consumer_rate(g)
    if unit is None or rate is None:
        return None
    sharing, admitted = consumers_per_partition(g), math.ceil(g.record_locks / unit)
    if admitted >= sharing:
        return None
    allowed = min(admitted * g.partitions, g.consumers) * rate
    what = f"{unit:.0f}-record batches" if g.acquire_mode != "record_limit" else f"max.poll.records {unit:.0f}"
    return Limit(
        "lock budget",
        allowed,
        {"recordLocks": g.record_locks, "recordsPerFetch": round(unit, 1), "consumersPerPartition": sharing,
         "busyPerPartition": admitted, "perConsumerRate": round(rate, 1), "partitions": g.partitions},
        f"lock budget {g.record_locks} / {what} -> {admitted} of {sharing} consumers busy per partition "
        f"x {rate:,.0f} msg/s x {g.partitions} partitions -> {allowed:,.0f} msg/s",
        LOCK_LEVERS,
    )  # fmt: skip


def processing_capacity(g: GroupInputs) -> Limit | None:
    """Every consumer busy processing: consumers x lanes x 1000 / processing ms."""
    rate = per_consumer_rate(g)
    if rate is None:
        return None
    allowed = g.consumers * rate
    return Limit(
        "processing capacity",
        allowed,
        {"consumers": g.consumers, "procMs": g.proc_ms, "parallelism": g.parallelism, "perConsumerRate": rate},
        f"processing capacity {g.consumers} consumers x {rate:,.0f} msg/s ({g.proc_ms:g} ms a record, "
        f"parallelism {g.parallelism}) -> {allowed:,.0f} msg/s",
        PROCESSING_LEVERS,
    )


def fetch_waits(g: GroupInputs) -> Limit | None:
    """record_limit with fewer consumers than partitions: a consumer fetches from one broker at a time
    and may wait out fetch.max.wait.ms at a drained one, so it gets about max.poll.records per wait
    (docs/scenarios/share-record-limit-stall.md)."""
    if g.acquire_mode != "record_limit" or g.consumers >= g.partitions or g.fetch_max_wait_ms <= 0:
        return None
    allowed = g.consumers * g.max_poll_records * 1000 / g.fetch_max_wait_ms
    return Limit(
        "fetch waits",
        allowed,
        {"consumers": g.consumers, "partitions": g.partitions, "maxPollRecords": g.max_poll_records,
         "fetchMaxWaitMs": g.fetch_max_wait_ms},
        f"fetch waits: record_limit, {g.consumers} consumers < {g.partitions} partitions x "
        f"{g.max_poll_records} records / {g.fetch_max_wait_ms:g} ms -> {allowed:,.0f} msg/s",
        FETCH_WAIT_LEVERS,
    )  # fmt: skip


LIMITS = (lock_budget, processing_capacity, fetch_waits)


def generator_limit(measured: float, saturated: list[dict]) -> Limit:
    """dimster's own load generator (diagnosis/generator.py), seen rather than predicted: what the group
    consumed is what the saturated workers managed; `saturated` as WorkerLoad.to_json() gives them."""
    inputs: dict[str, float | int | str] = {}
    for w in saturated:
        inputs[f"worker{w['worker']}WaitShare"] = w["wait_share"]
        inputs[f"worker{w['worker']}CpuCores"] = w["cpu_cores"]
        inputs[f"worker{w['worker']}StealShare"] = w["steal_share"]
        if w["publish_delay_p99_ms"] is not None:
            inputs[f"worker{w['worker']}PublishDelayP99Ms"] = w["publish_delay_p99_ms"]
    workers = "; ".join(sentence(w) for w in saturated)
    return Limit(GENERATOR, measured, inputs, f"the load generator: {workers}", GENERATOR_LEVERS)


def diagnose(
    g: GroupInputs, measured: float, offered: float, notes: tuple[str, ...] = (), generator: list[dict] | None = None
) -> Diagnosis:
    """The limit that allows the least, when its prediction is within TOLERANCE of `measured`. Otherwise
    dimster's own load generator when a worker could not keep its schedule (`generator`: the saturated
    workers): the group's rate then measures dimster. A Kafka limit that explains the rate stays the
    limit on a busy host; the generator's state is then a note."""
    limits = tuple(sorted((lim for f in LIMITS if (lim := f(g)) is not None), key=lambda lim: lim.rate))
    binding = limits[0] if limits else None
    explains = binding is not None and abs(binding.rate - measured) <= TOLERANCE * max(measured, 1e-9)
    if explains:
        if generator:
            notes = (*notes, f"the load generator was saturated too ({'; '.join(sentence(w) for w in generator)})")
        return Diagnosis(measured, offered, binding, limits, notes)
    if generator:
        return Diagnosis(measured, offered, generator_limit(measured, generator), limits, notes)
    return Diagnosis(measured, offered, None, limits, notes)
