"""The live diagnosis of a run whose share groups fall behind (diagnosis/limits.py): after each console
window, with the workload as it is now. Behind for WINDOWS windows in a row, the run says which limit
binds, or that the shortfall is unexplained, once, and again whenever that changes; the `limit` events
are the bundle's timeline of diagnoses (`dimster explain`)."""

import math
from typing import Protocol

from dimster.clients import STATS_INTERVAL_S
from dimster.cluster.backend import ClusterBackend
from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.control.run_log import RunLog
from dimster.coordinator.observers.brokers import BrokerObservers
from dimster.coordinator.workers.topology import Topology
from dimster.diagnosis.limits import GENERATOR, TOLERANCE, Diagnosis, diagnose
from dimster.results.bundle import ResultsBundle
from dimster.results.records import BindingLimit
from dimster.workload.group_inputs import group_inputs, record_locks
from dimster.workload.model import Workload

BEHIND_SHARE = 0.95  # a window whose consumption is below this share of the offered rate is behind
BACKLOG_GROWTH = 0.05  # ... or whose backlog grew by this share of the records offered in it
WINDOWS = 2  # windows behind in a row before a diagnosis
SPAN_WINDOWS = 5  # the measured rate: over this many of the last windows of one setting
LOAD_PHASES = ("warmup", "measure")
BUSY_BROKER_IDLE = 0.2  # a broker whose request handlers are idle less than this is noted


def producer_batches(producer_stats: dict[str, tuple[float, dict]]) -> dict[str, float | None]:
    """Average records and bytes per produced batch over the producers' latest statistics (the
    aggregate's `producer_stats`); those of producers gone for two statistics intervals (removed, or
    rebuilt without batches) drop out."""
    newest = max((at for at, _ in producer_stats.values()), default=0.0)
    latest = [
        stats
        for at, stats in producer_stats.values()
        if at >= newest - 2 * STATS_INTERVAL_S and stats.get("batch_records_avg")
    ]
    if not latest:
        return {"batchRecordsAvg": None, "batchBytesAvg": None}
    return {
        "batchRecordsAvg": sum(s["batch_records_avg"] for s in latest) / len(latest),
        "batchBytesAvg": sum(s["batch_bytes_avg"] for s in latest) / len(latest),
    }


class LimitSource(Protocol):
    """What the watch reads: the coordinator."""

    workload: Workload
    topology: Topology
    aggregate: RunAggregate
    cluster: ClusterBackend
    bundle: ResultsBundle
    log: RunLog
    observers: BrokerObservers

    @property
    def phase(self) -> str: ...


def is_behind(window: dict, backlog_before: int | None, seconds: float, groups: int, topics: int) -> bool:
    """Whether a group consumed less than its topic was offered in the window (each group reads one
    topic whole), or the backlog (summed over groups) grew by more than BACKLOG_GROWTH of it."""
    offered, consumed = window.get("pubRate") or 0.0, window.get("consRate") or 0.0
    if offered <= 0:
        return False
    grew = backlog_before is not None and window["backlog"] - backlog_before > BACKLOG_GROWTH * offered * seconds
    return consumed / groups < BEHIND_SHARE * offered / topics or grew


def changed(before: Diagnosis | None, now: Diagnosis) -> bool:
    """A new diagnosis is told when the binding limit, or its prediction, moved."""
    if before is None or before.name != now.name:
        return True
    if before.limit and now.limit and now.name != GENERATOR:  # the generator's rate is measured, not predicted
        return abs(now.limit.rate - before.limit.rate) > TOLERANCE * before.limit.rate
    return False


class LimitWatch:
    def __init__(self, run: LimitSource):
        self.run = run
        self.behind = 0  # windows behind in a row
        self.settings: Workload | None = None  # the workload the previous window ran with
        self.backlog: int | None = None  # at the end of the previous window
        self.current: Diagnosis | None = None
        self.span: list[tuple[float, float, float]] = []  # this setting's last windows: consumed, offered, seconds

    def see(self, window: dict) -> None:
        """One console window (RunAggregate.take_window) has ended."""
        run, w = self.run, self.run.workload
        backlog_before, self.backlog = self.backlog, window.get("backlog")
        share_groups = w.consumer_type == "SHARE_GROUP" and run.topology.groups and not w.consumers_paused
        if run.phase not in LOAD_PHASES or not share_groups:
            self.behind, self.settings, self.current = 0, None, None
            return
        if w is not self.settings:  # load's first window (the clients' start), or one a live change cut
            self.settings, self.behind, self.span = w, 0, []  # in two: its numbers are of no one setting
            return
        seconds = window.get("seconds") or 0.0
        self.span = [
            *self.span[1 - SPAN_WINDOWS :],
            (window.get("consRate") or 0.0, window.get("pubRate") or 0.0, seconds),
        ]
        groups, topics = len(run.topology.groups), max(1, len(run.topology.topics))
        behind = is_behind(window, backlog_before, w.report_interval_seconds, groups, topics)
        self.behind = self.behind + 1 if behind else 0
        if self.behind == 0 and self.current is not None:
            self.current = run.bundle.run_info["limit"] = None
            run.log.tell("limit_cleared", "-- limit: none (consumption keeps up)")
        elif self.behind >= WINDOWS:
            self._diagnose(window)

    def _diagnose(self, window: dict) -> None:
        run, w = self.run, self.run.workload
        at_start = run.bundle.run_info.get("groupConfig", {}).get("start", {})
        locks = record_locks(w, run.cluster.broker_config(), at_start)
        batch = producer_batches(run.aggregate.producer_stats)["batchRecordsAvg"]
        groups, topics = len(run.topology.groups), max(1, len(run.topology.topics))
        consumed, offered = span_rates(self.span)
        measured, offered = consumed / groups, offered / topics
        inputs, seen = group_inputs(w, locks, window, batch), notes(window, run.observers.handler_idle)
        now = diagnose(inputs, measured, offered, seen, window.get("generator"))
        before, self.current = self.current, now
        if changed(before, now):
            told = to_json(now)
            run.log.tell("limit", f"-- {now.line()}", **told)
            # run.json: what limited the groups as the run ended (a campaign's page shows it per point)
            limit: BindingLimit = {
                "limit": told["limit"], "limitRate": told["limitRate"],
                "measured": told["measured"], "offered": told["offered"],
            }  # fmt: skip
            run.bundle.run_info["limit"] = limit


def span_rates(span: list[tuple[float, float, float]]) -> tuple[float, float]:
    """Consumed and offered msg/s over the span's windows. A share consumer receives a whole fetch at
    once: one window counts a fetch more or less than the rate holds (a 100-record fetch is 50 msg/s of
    a 2 s window), and the span's several windows make that error theirs together, not one's."""
    seconds = sum(s for _, _, s in span)
    if not seconds:
        return 0.0, 0.0
    return sum(c * s for c, _, s in span) / seconds, sum(o * s for _, o, s in span) / seconds


def notes(window: dict, handler_idle: dict[int, float]) -> tuple[str, ...]:
    """What else the window says of the shortfall, without a formula: producers short of their target,
    brokers whose request handlers are seldom idle. (dimster's own saturated workers are a limit of their
    own: diagnosis/generator.py.)"""
    found = []
    target, sent = window.get("targetRate"), window.get("pubRate10s")
    if target and sent is not None and sent < BEHIND_SHARE * target:
        found.append(f"the producers sent {sent:,.0f} of the {target:,.0f} msg/s targeted")
    if handler_idle and (idle := min(handler_idle.values())) < BUSY_BROKER_IDLE:
        broker = min(handler_idle, key=lambda b: handler_idle[b])
        found.append(
            f"broker {broker}'s request handlers were idle {idle:.0%} of the last minute: the brokers may limit"
        )
    return tuple(found)


def to_json(d: Diagnosis) -> dict:
    """A diagnosis as an event's and the status's fields."""
    binding = d.limit
    return {
        "limit": d.name,
        "limitRate": round(binding.rate, 1) if binding else None,
        "measured": round(d.measured, 1),
        "offered": round(d.offered, 1),
        "limitInputs": binding.inputs if binding else {lim.name: lim.inputs for lim in d.limits},
        "sentence": binding.sentence if binding else None,
        "levers": list(binding.levers) if binding else [],
        "allowed": {lim.name: round(lim.rate, 1) for lim in d.limits if math.isfinite(lim.rate)},
        "notes": list(d.notes),
    }
