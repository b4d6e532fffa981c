"""`dimster tune`'s plan from the model alone (diagnosis/limits.py): from the workload's settings, the
rate each limit allows its share groups, and step by step the cheapest lever change predicted to lift
the binding limit, until the rate goals hold with MARGIN to spare, or no allowed change helps.

The model predicts a group's consumption (the least of the offered rate and what each limit allows),
so goals on `consumed.rate` (and on `produced.rate`, which the workload sets) are planned for; any
other goal (a latency, a count) only a run measures, and the plan says so. Without a run, the records
a producer batches are estimated from its settings (ESTIMATED: a run measures them)."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from dimster.diagnosis.limits import DEFAULT_MAX_POLL_RECORDS, LIMITS, Limit
from dimster.errors import DimsterError
from dimster.tuning.levers import BATCH_SIZE_KEY, LOCKS_CEILING, LOCKS_KEY, SHARE, Lever, after_step
from dimster.verdict.expressions import Comparison, parse_threshold
from dimster.workload.group_inputs import group_inputs, record_locks
from dimster.workload.model import Workload, long_forms, parse_workload
from dimster.workload.overrides import apply_overrides

MARGIN = 0.10  # the goals must hold with every limit allowing 10 % less, and batches 10 % larger, than predicted
MAX_STEPS = 12
RECORD_OVERHEAD = 16  # bytes a record adds to its value in a batch, about (varints, no headers)
DEFAULT_BATCH_SIZE = {"java": 16384, "librdkafka": 1_000_000}  # the producers' own default
LINGER_MS = 5.0  # both libraries' default linger.ms
PLANNED = ("consumed.rate", "produced.rate")


@dataclass(frozen=True)
class Step:
    limit: str  # the binding limit's sentence before the step
    lever: str
    before: int | str
    after: int | str
    predicted_before: float  # consumed msg/s, all groups
    predicted: float
    cost: float
    why: str
    redeploy: dict[str, int] = field(default_factory=dict)  # workload keys a broker redeploy sets first


def redeploy_for(lever: Lever, to: int | str) -> dict[str, int]:
    """What the brokers' config must say before `lever` can be `to`: nothing, or a raised ceiling."""
    return {f"brokerConfig.{LOCKS_CEILING}": int(to)} if lever.needs_redeploy(to) else {}


@dataclass
class Plan:
    goals: list[str]
    offered: float  # msg/s the producers offer, all topics (each group is offered its topic's)
    predicted_start: float
    steps: list[Step] = field(default_factory=list)
    met: bool = False
    reason: str = ""  # why the plan ends
    limit: str = ""  # the binding limit at its end
    notes: list[str] = field(default_factory=list)

    @property
    def changes(self) -> dict[str, int | str]:
        return changes_of(self.steps)


def changes_of(steps: list[Step]) -> dict[str, int | str]:
    """The lever values `steps` end with, where they differ from those they began with."""
    first = {s.lever: s.before for s in reversed(steps)}
    last = {s.lever: s.after for s in steps}
    changed: dict[str, int | str] = {k: v for k, v in last.items() if v != first[k]}
    for step in steps:  # a broker redeploy's setting stays, also when its lever is put back
        changed.update(step.redeploy)
    return changed


def lever_values(w: Workload, broker_config: dict[str, str]) -> dict[str, int | str]:
    """Each known lever's value in the workload (and the brokers' config, for the lock budget); the tuner
    knows share groups only, so another workload is one error line."""
    if w.consumer_type != "SHARE_GROUP" or not w.groups_per_topic:
        raise DimsterError(f"workload {w.name}: dimster tune tunes share groups (consumerType: SHARE_GROUP)")
    share = {**w.kafka_config.common_config, **w.kafka_config.share_consumer_config}
    producer = {**w.kafka_config.common_config, **w.kafka_config.producer_config}
    return {
        "consumersPerGroup": w.consumers_per_group,
        "consumerProcParallelism": w.consumer_proc_parallelism,
        f"{SHARE}max.poll.records": int(share.get("max.poll.records", DEFAULT_MAX_POLL_RECORDS)),
        f"{SHARE}share.acquire.mode": str(share.get("share.acquire.mode", "batch_optimized")),
        LOCKS_KEY: record_locks(w, broker_config, {}),
        BATCH_SIZE_KEY: int(producer.get("batch.size", DEFAULT_BATCH_SIZE[w.client_library.of("producer")])),
    }


def records_per_batch(w: Workload, batch_size: int) -> float:
    """ESTIMATED records a producer batch holds: what fills `batch_size`, or what a producer sends in
    linger.ms, whichever is fewer (at least 1)."""
    producer = {**w.kafka_config.common_config, **w.kafka_config.producer_config}
    linger_ms = float(producer.get("linger.ms", LINGER_MS))
    per_producer = w.producer_rate / max(1, w.topics * w.producers_per_topic)
    by_size = max(1, batch_size // (w.message_size + RECORD_OVERHEAD))
    return float(max(1.0, min(by_size, per_producer * linger_ms / 1000)))


def predict(
    w: Workload, values: dict[str, int | str], seen: dict | None = None, batch_scale: float = 1.0
) -> tuple[float, list[Limit]]:
    """What the limits allow all groups together (msg/s; infinite when none binds), and each group's
    limits, the least first. Each group reads its topic whole: it is offered the topic's rate. `seen`:
    a run's status, whose records per producer batch (scaled by batch.size against `seen`'s own) and
    per poll stand for the estimates. `batch_scale`: the records per batch taken that much larger."""
    batch_size = int(values[BATCH_SIZE_KEY])
    batch = records_per_batch(w, batch_size)
    window: dict = {}
    if seen and seen.get("batchRecordsAvg"):
        batch = max(1.0, seen["batchRecordsAvg"] * min(1.0, batch_size / seen["batchSize"]))
    batch *= batch_scale
    if seen and seen.get("recordsPerPoll"):
        window["recordsPerPoll"] = seen["recordsPerPoll"]
    g = group_inputs(w, int(values[LOCKS_KEY]), window, batch)
    limits = sorted((lim for f in LIMITS if (lim := f(g)) is not None), key=lambda lim: lim.rate)
    allowed = limits[0].rate * w.topics * w.groups_per_topic if limits else float("inf")
    return allowed, limits


def offered(w: Workload) -> float:
    """Msg/s offered to all groups: each group is offered every record."""
    return w.producer_rate * w.groups_per_topic


def consumed(w: Workload, allowed: float, margin: float = 0.0) -> float:
    """Consumed msg/s of all groups: what they are offered, or what the limits allow (less `margin`)."""
    return min(offered(w), allowed * (1 - margin))


def with_values(w: Workload, changes: dict[str, int | str]) -> Workload:
    """The workload with the lever values set, as `--set` sets them (and validated as it is)."""
    pairs = [(key, str(value)) for key, value in changes.items()]
    return parse_workload(apply_overrides(long_forms(w.to_yaml_dict()), pairs), "the tuned workload")


def parse_goals(texts: Sequence[str]) -> list[Comparison]:
    goals = []
    for text in texts:
        try:
            goals.append(parse_threshold(text))
        except ValueError as e:
            raise DimsterError(f"--goal '{text}': {e}") from None
    if not goals:
        raise DimsterError("dimster tune needs a goal: --goal 'consumed.rate >= 20000msg/s'")
    return goals


def holds(goals: list[Comparison], w: Workload, allowed: float) -> bool:
    """Whether every planned goal holds with the limits allowing MARGIN less than `allowed` (cautious's)."""
    values = {"consumed.rate": consumed(w, allowed, MARGIN), "produced.rate": w.producer_rate}
    planned = [g for g in goals if set(g.figures()) <= set(PLANNED)]
    return all(g.judge(values)[2] for g in planned)


def cautious(w: Workload, values: dict[str, int | str], seen: dict | None = None) -> tuple[float, list[Limit]]:
    """predict's at the batches measured (or estimated) or at batches MARGIN larger, whichever allows
    less: a lock budget admits whole fetches, so one set just above a number of fetches of the batches
    measured admits one fewer when they come a few records larger (a run's step to 318 locks for
    102-record batches met 107-record ones: 3 fetches of 4, 567 of 700 msg/s). The two sizes only: a
    fetch of whole batches up to max.poll.records is not monotonic in between."""
    nominal, larger = predict(w, values, seen), predict(w, values, seen, batch_scale=1 + MARGIN)
    return larger if larger[0] < nominal[0] else nominal


MET = "the goals hold with every limit allowing 10 % less and batches 10 % larger"


def next_step(
    w: Workload, goals: list[Comparison], levers: list[Lever], values: dict[str, int | str], seen: dict | None = None
) -> tuple[Step | None, str, str]:
    """The step to take now by the model (None when there is none), why there is none (MET when the
    goals hold), and the limit that binds now."""
    allowed, limits = cautious(w, values, seen)
    binding = limits[0] if limits and consumed(w, allowed) < offered(w) else None
    limit = binding.sentence if binding else f"the offered rate, {w.producer_rate:,.0f} msg/s"
    if holds(goals, w, allowed):
        return None, MET, limit
    if binding is None or consumed(w, allowed * (1 - MARGIN)) >= offered(w):
        return None, f"the producers offer {w.producer_rate:,.0f} msg/s: the goals ask for more than is offered", limit
    step = _cheapest_step(w, goals, levers, values, binding, seen)
    if step is None:
        usable = [lv.key for lv in levers if lv.key in binding.levers]
        names = ", ".join(usable) or "none"
        why = f"{binding.name} binds and no allowed change lifts it (the allowed levers it names: {names})"
        for lever in levers:  # one the brokers' ceiling stops: say what would lift it
            if lever.ceiling is not None and not lever.redeploy and lever.key in binding.levers:
                above = {**values, lever.key: 2 * max(lever.ceiling, int(values[lever.key]))}
                if cautious(w, above, seen)[0] > allowed:
                    why += f"; above {lever.ceiling}, the brokers' {LOCKS_CEILING}, takes --allow-redeploy"
        return None, why, limit
    return step, "", limit


def plan(w: Workload, goals: list[Comparison], levers: list[Lever], broker_config: dict[str, str]) -> Plan:
    """The whole plan from the model alone (--dry-run)."""
    values = lever_values(w, broker_config)
    result = Plan([g.text for g in goals], w.producer_rate, consumed(w, cautious(w, values)[0]))
    result.notes += [f"'{g.text}' is not predicted by the model: a run measures it" for g in goals if not planned(g)]
    batch = records_per_batch(w, int(values[BATCH_SIZE_KEY]))
    result.notes.append(f"records per producer batch estimated from batch.size and linger.ms: {batch:g}")
    for _ in range(MAX_STEPS):
        step, result.reason, result.limit = next_step(w, goals, levers, values)
        if step is None:
            result.met = result.reason == MET
            return result
        values[step.lever] = step.after
        w = with_values(w, {step.lever: step.after})
        levers = after_step(levers, step.lever, step.after)
        result.steps.append(step)
    result.reason = f"no plan within {MAX_STEPS} steps"
    return result


def planned(goal: Comparison) -> bool:
    """Whether the model predicts the goal's figures."""
    return set(goal.figures()) <= set(PLANNED)


def _cheapest_step(
    w: Workload,
    goals: list[Comparison],
    levers: list[Lever],
    values: dict[str, int | str],
    binding: Limit,
    seen: dict | None,
) -> Step | None:
    """The cheapest single change that meets the goals; else the one that lifts the prediction most
    for its cost. Levers the binding limit names come first; others only when none of those helps."""
    before = consumed(w, cautious(w, values, seen)[0])
    named = [lv for lv in levers if lv.key in binding.levers]
    for pool in (named, [lv for lv in levers if lv not in named]):
        tried: list[tuple[Step, bool]] = []
        for lever in pool:
            for value in lever.candidates(values[lever.key]):
                try:
                    changed = with_values(w, {lever.key: value})
                except DimsterError:
                    continue  # a value the workload does not take with the others (a bound of its own)
                allowed, _ = cautious(changed, {**values, lever.key: value}, seen)
                after = consumed(changed, allowed)
                if after > before * 1.001:
                    cost = lever.cost_of(values[lever.key], value)
                    now, redeploy = values[lever.key], redeploy_for(lever, value)
                    step = Step(binding.sentence, lever.key, now, value, before, after, cost, "", redeploy)
                    tried.append((step, holds(goals, changed, allowed)))
        meeting = [step for step, met in tried if met]
        if meeting:
            best = min(meeting, key=lambda s: (s.cost, -s.predicted))
            return _why(best, binding, "the cheapest change predicted to meet the goals")
        if tried:
            best = max((s for s, _ in tried), key=lambda s: ((s.predicted - before) / max(s.cost, 1e-9), -s.cost))
            return _why(best, binding, "no single change meets the goals: the most rate for its cost")
    return None


def _why(step: Step, binding: Limit, reason: str) -> Step:
    why = f"{binding.name} binds; {reason} ({step.predicted_before:,.0f} -> {step.predicted:,.0f} msg/s)"
    for key, value in step.redeploy.items():
        why += f"; a broker redeploy sets {key.removeprefix('brokerConfig.')} {value} first"
    return Step(**{**step.__dict__, "why": why})
