"""The run's status, as `dimster status --json`, `wait --until` and the metrics endpoint see it: the
numeric fields of `status_schema.FIELDS` (each one's value given here, under the name spelled there)
and the run's identity, phase, workers and settings."""

import time
from dataclasses import dataclass
from typing import Protocol

from dimster.cluster.backend import ClusterBackend
from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.intake import ReportIntake
from dimster.coordinator.control.conditions import LIVE_FIGURES
from dimster.coordinator.control.exporter import StatusExporter
from dimster.coordinator.control.status_schema import NAMES
from dimster.coordinator.loop.limit_watch import LimitWatch, producer_batches, to_json
from dimster.coordinator.observers.brokers import BrokerObservers
from dimster.coordinator.workers.ensemble import Ensemble
from dimster.coordinator.workers.topology import Topology
from dimster.diagnosis.limits import Diagnosis
from dimster.results.bundle import ResultsBundle
from dimster.verdict.figures import FIGURES, status_value
from dimster.workload.model import Workload


@dataclass
class RunFacts:
    """What the status says of a run besides its aggregate: given by the run loop each time."""

    load_started: float
    producers: int
    consumers: int
    window: dict  # the last status line's window (RunAggregate.take_window)
    broker_lag: int | None
    broker_lag_at: float | None  # epoch of the brokers' last lag reading
    unconsumed_by_group: dict[str, int] | None  # known once the consumers have closed at the end
    limit: Diagnosis | None = None  # why a share group falls behind, while it does (limit_watch.py)


def numeric_status(a: RunAggregate, facts: RunFacts) -> dict:
    """Every field of status_schema.FIELDS, in its order; a field without a value here is an error."""
    started = facts.load_started
    unconsumed = facts.unconsumed_by_group
    values = {
        **a.workers.status_rates(time.time()),
        "sent": a.sent,
        "acked": a.acked,
        "received": a.received,
        "backlog": a.backlog,
        "brokerLag": facts.broker_lag,
        "brokerLagAtSeconds": round(facts.broker_lag_at - started, 1) if facts.broker_lag_at else None,
        "duplicates": a.duplicates,
        "sendErrors": a.send_errors,
        "lockRenewals": a.renewed,
        "lockTimeouts": a.lock_timeouts,
        "lost": a.lost(unconsumed) if unconsumed is not None else None,
        "unconsumed": None if unconsumed is None else sum(unconsumed.values()),
        "dead_lettered": a.dead_lettered,
        "dead_letter_missing": a.dead_letter_missing,
        "dead_letter_duplicates": a.dead_letter_duplicates,
        "e2eP50Ms": facts.window.get("e2eP50Ms"),
        "e2eP99Ms": facts.window.get("e2eP99Ms"),
        "publishP99Ms": facts.window.get("publishP99Ms"),
        "elapsedSeconds": round(time.time() - started, 1) if started else 0.0,
        "producers": facts.producers,
        "consumers": facts.consumers,
        **producer_batches(a.producer_stats),
        "recordsPerPoll": facts.window.get("recordsPerPoll"),
        "maxPollRecords": facts.window.get("maxPollRecords"),
        "workerWaitShare": facts.window.get("workerWaitShare"),
        "generatorSaturated": len(facts.window.get("generator") or []),
        "limitRate": facts.limit.limit.rate if facts.limit and facts.limit.limit else None,
    }
    if set(values) != set(NAMES):  # one name, one value: the schema and this function move together
        raise AssertionError(f"status fields differ from status_schema: {sorted(set(values) ^ set(NAMES))}")
    return {name: values[name] for name in NAMES}


class StatusSource(Protocol):
    """What a run's whole status is read from: the coordinator."""

    cluster: ClusterBackend
    bundle: ResultsBundle
    exporter: StatusExporter | None
    observers: BrokerObservers
    ensemble: Ensemble
    topology: Topology
    workload: Workload
    aggregate: RunAggregate
    intake: ReportIntake
    limits: LimitWatch
    run_id: str
    run_tag: str
    load_started: float
    last_window: dict
    unconsumed_by_group: dict[str, int] | None
    context: dict

    @property
    def phase(self) -> str: ...


def live_figures(numbers: dict) -> dict[str, float | None]:
    """The numbers under the names `wait --until` gives them (`e2e.p99`, `consumed.rate`), each figure
    that has a value now: latencies of the last status line's window, rates of the last 5 s, counts so
    far (a threshold judges the measured phase; its value is in `thresholds`)."""
    return {name: status_value(FIGURES[name], numbers) for name in LIVE_FIGURES}


def limit_status(d: Diagnosis | None) -> dict:
    """`limit` (the binding limit's name, `unexplained`, or None while the groups keep up) and
    `limitInputs` (its numbers; `limitRate` is a numeric field)."""
    if d is None:
        return {"limit": None, "limitInputs": None}
    return {"limit": d.name, "limitInputs": to_json(d)["limitInputs"]}


def run_status(run: StatusSource) -> dict:
    """`dimster status --json`: the run's identity, phase, numbers, brokers, workers and settings."""
    lag, groups, t = run.observers.broker_lag, list(run.topology.groups), run.topology
    facts = RunFacts(
        run.load_started, len(t.producers), len(t.consumers), run.last_window or {},
        run.observers.lag(groups), lag.at if lag else None, run.unconsumed_by_group, run.limits.current,
    )  # fmt: skip
    numbers = numeric_status(run.aggregate, facts)
    return {
        "environment": run.cluster.profile.name,
        "runId": run.run_id,
        "runTag": run.run_tag,
        "results": str(run.bundle.path),
        "metricsUrl": run.exporter.url if run.exporter else None,
        "phase": run.phase,
        **numbers,
        "figures": live_figures(numbers),
        **limit_status(run.limits.current),
        "generator": (run.last_window or {}).get("generator") or [],  # the workers behind schedule, and why
        "thresholds": run.intake.judge.status(numbers),  # each one's value over the measured phase so far
        "brokers": run.observers.registered(),
        "workers": run.ensemble.described(),
        "mode": run.workload.mode.type,
        "consumersPaused": run.workload.consumers_paused,
        **run.context,
        "settings": run.workload.to_yaml_dict(),
    }
