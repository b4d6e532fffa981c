"""The end of a run in numbers: run.json's totals from the aggregate and the groups' positions, the
plan's verdict, why a group's account does not close, the hosts' clock offsets, and the run's last
console line."""

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from dimster.clients.properties import role_properties, run_libraries
from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.journal import RunJournal
from dimster.coordinator.account.self_cost import latency_brief
from dimster.coordinator.control.console import dead_letter_counts
from dimster.coordinator.control.run_log import RunLog
from dimster.errors import DimsterError
from dimster.results.metrics_parts import compact_parts
from dimster.results.metrics_writer import MetricsWriter
from dimster.results.records import ClockOffset, GroupAccount, RunMode, RunStatus, Totals
from dimster.workload.model import Workload
from dimster.workload.modes.base import RunPlan
from dimster.workload.modes.correctness import verdict_line

CLOCK_WARNING_SHARE = 0.1  # of the e2e p50 that clock uncertainty may reach before the run warns


@dataclass
class EndAccount:
    account: dict[str, GroupAccount]  # per group: its terms, and whether they close
    totals: Totals
    mode: dict  # run.json's `mode`: the plan's result and verdict (and the mode's own figures)
    notes: list[str]  # what the end's console line needs beside it


def close_account(
    a: RunAggregate, unconsumed_by_group: dict[str, int] | None, plan: RunPlan, workload: Workload, log: RunLog
) -> EndAccount:
    """The run's account at its end; the plan judges the totals."""
    if late := a.outcomes.late:  # the account replays the run's journal (share_outcomes.restore): say why
        log.event("outcomes_replayed", late=late)
    account = a.account(unconsumed_by_group)
    totals = run_totals(a, unconsumed_by_group, account)
    notes = [note] if (note := duplicates_note(totals.get("duplicates") or 0, workload)) else []
    mode = plan.result(cast(dict, totals), a) or {"type": workload.mode.type}  # a plan may add to the totals
    return EndAccount(account, totals, mode, notes)


def duplicates_note(duplicates: int, workload: Workload) -> str | None:
    """Duplicates from producers that are not idempotent may be the log's, not the group's: a Produce
    request retried after a time-out writes its records again, each then delivered once."""
    if not duplicates:
        return None
    library = run_libraries(workload)["producer"]
    producer = role_properties(workload, "producer")
    java_default = library == "java" and str(producer.get("acks", "all")) in ("all", "-1")
    if str(producer.get("enable.idempotence", java_default)).lower() == "true":
        return None
    return (
        f"{duplicates:,} duplicates may include records the producers wrote twice: {library} producers "
        "without enable.idempotence write a Produce request's records again when they retry it after a "
        "time-out; kafkaConfig.producerConfig.enable.idempotence=true rules that out"
    )


def record_failure(
    error: Exception, a: RunAggregate, metrics: MetricsWriter | None, log: RunLog, journal: RunJournal
) -> None:
    """The run ends by an exception before its end account: what was measured is flushed, and run.json
    says `failed`, why, and the totals so far (the groups' positions unknown: nothing counts as lost).
    The journal stays unless the flush succeeded."""
    info = log.bundle.run_info
    if info.get("status") != "running":  # its end is recorded already
        return
    reason = str(error) if isinstance(error, DimsterError) else log.bundle.internal_error("the run", error)
    flushed = True
    if metrics:
        try:
            metrics.flush()
            metrics.close()
        except Exception as e:  # already failing: keep the first error, note this one  # noqa: BLE001
            flushed = False
            log.event("metrics_not_flushed", reason=f"{type(e).__name__}: {e}")
    account = a.account(None)
    totals = run_totals(a, None, account)
    info.update({"status": "failed", "failure": reason, "ended": time.time(), "totals": totals, "account": account})
    log.bundle.save_run_info()
    log.event("run_failed", reason=reason)
    log.bundle.console(f"error: {reason}")  # the line the command ends with, kept in console.log too
    if flushed:
        journal.remove()


def record_end(end: EndAccount, forced: bool, a: RunAggregate, log: RunLog, plan: str) -> str | None:
    """run.json's end (status, totals, account, the e2e latency in brief, the plan's `mode`; the run
    wrote its other facts, `failure` among them), the
    run_ended event, the metrics' parts merged (a summary reads one file a table), groups whose
    account does not close, the last console lines. Returns why the plan's verdict fails the run
    (None when it does not)."""
    info = log.bundle.run_info
    status: RunStatus = "failed" if info.get("failure") else ("forced" if forced else "completed")
    mode = cast(RunMode, end.mode)  # with the mode's own figures beside RunMode's keys
    e2e = latency_brief(a.e2e_measured)  # the summary has more
    info.update({"status": status, "totals": end.totals, "account": end.account, "ended": time.time(), "mode": mode})
    info["e2e_ms"] = e2e
    log.bundle.save_run_info()
    log.event("run_ended", status=status, **end.totals)
    for note in compact_parts(log.bundle.path / "metrics"):  # the run's last flush is done: nothing writes there now
        log.say(f"note: {note}")
    for group, terms in end.account.items():
        if not terms["closes"]:
            why = why_open(terms, a.lock_timeouts, a.crashes)
            log.tell("account_open", f"-- the account of group {group} does not close: {why}", group=group, **terms)
    log.say(ended_line(status, end.totals, log.bundle.path))
    for note in end.notes:
        log.say(f"note: {note}")
    if end.mode.get("verdict"):
        log.say(f"{plan}: {end.mode['verdict']}")
    if end.mode.get("passed") is False and status != "failed":
        log.event("correctness_failed", reasons=end.mode["reasons"])
        return f"correctness failed: {', '.join(end.mode['reasons'])}"
    if end.mode.get("passed") and status != "failed":
        log.say(verdict_line(end.mode))
    return None


def clock_offsets(by_worker: dict[int, ClockOffset], e2e_p50_us: float | None, log: RunLog) -> dict[str, ClockOffset]:
    """Each remote worker's clock offset (the e2e latencies are corrected by it) and its uncertainty;
    warns when that uncertainty is a large share of the measured e2e p50."""
    offsets = {str(i): record for i, record in by_worker.items()}
    worst = max((r["uncertainty_ms"] or 0.0 for r in offsets.values()), default=0.0)
    if e2e_p50_us and worst > CLOCK_WARNING_SHARE * e2e_p50_us / 1000:
        p50_ms = e2e_p50_us / 1000
        message = (
            f"clock offsets between hosts are known to ±{worst:.1f} ms, {worst / p50_ms:.0%} of the "
            f"e2e p50 ({p50_ms:.1f} ms): cross-host e2e latencies are that uncertain"
        )
        log.tell("clock_uncertainty_high", f"-- {message}", uncertainty_ms=worst, e2e_p50_ms=p50_ms, message=message)
    return offsets


def run_totals(a: RunAggregate, unconsumed_by_group: dict[str, int] | None, account: dict[str, GroupAccount]) -> Totals:
    """run.json's `totals`: `lost`, `unconsumed` and `in_doubt` from the groups' positions at the end
    (None when they could not be read), `archived` from the groups' accounts."""
    totals: Totals = {
        "sent": a.sent,
        "acked": a.acked,
        "send_errors": a.send_errors,
        "received": a.received,
        "accepted": a.accepted,
        "released": a.released,
        "rejected": a.rejected,
        "duplicates": a.duplicates,
        "lost": a.lost(unconsumed_by_group),
        "unconsumed": None if unconsumed_by_group is None else sum(unconsumed_by_group.values()),
        "in_doubt": a.in_doubt(unconsumed_by_group),
        "backlog": a.backlog,
        "renewed": a.renewed,
        "renewals_refused": a.renewals_refused,
        "lock_timeouts": a.lock_timeouts,
        "ack_errors": a.ack_errors,
        "consumer_crashes": a.crashes,
        "redelivered_after_crash": a.redelivered_after_crash,
        "archived": sum(g["archived"] for g in account.values()),
        "dead_lettered": a.dead_lettered,
        "dead_letter_missing": a.dead_letter_missing,
        "dead_letter_duplicates": a.dead_letter_duplicates,
    }
    return totals


def why_open(terms: Mapping[str, Any], lock_timeouts: int, crashes: int) -> str:
    """Why a group's account (RunAggregate.account) does not close, in words."""
    if terms["unconsumed"] is None:
        return "the group's position is unknown"
    why = f"its terms add up to {-terms['unaccounted']:,} more than the {terms['acked']:,} acknowledged"
    causes = []  # records counted on receipt, then back in the group's reach
    if lock_timeouts:
        causes.append(f"{lock_timeouts:,} acknowledgements refused after lock time-outs")
    if crashes:
        causes.append(f"{crashes:,} consumer crash(es)")
    if causes:
        why += f" (records received, then back in the group's reach: {', '.join(causes)})"
    return why


def ended_line(status: str, totals: Mapping[str, Any], results: Path) -> str:
    """The run's last console line: where its records went (with a dead-letter queue: how many of the
    run's records it holds, and those missing or duplicated there when there are any) and where its
    results are."""
    unconsumed = "unknown" if totals["unconsumed"] is None else f"{totals['unconsumed']:,}"
    in_doubt = f", in doubt {totals['in_doubt']:,} (whose fate only the broker knew)" if totals["in_doubt"] else ""
    dead_letters = "".join(f", {count}" for count in dead_letter_counts(totals))
    return (
        f"run {status}: sent {totals['sent']:,} (acked {totals['acked']:,}), received {totals['received']:,}, "
        f"lost {totals['lost']:,}, unconsumed {unconsumed}{in_doubt}, "
        f"duplicates {totals['duplicates']:,}{dead_letters}; results in {results}"
    )
