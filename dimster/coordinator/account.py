"""The end of a run in numbers: run.json's totals from the aggregate and the groups' positions, why a
group's account does not close, and the run's last console line. The run loop records and says them."""

from pathlib import Path

from dimster.coordinator.aggregate import RunAggregate


def run_totals(a: RunAggregate, unconsumed_by_group: dict[str, int] | None, account: dict[str, dict]) -> dict:
    """run.json's `totals`: `lost`, `unconsumed` and `in_doubt` from the groups' positions at the end
    (None when they could not be read), `archived` from the groups' accounts."""
    return {
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
    }


def why_open(terms: dict, lock_timeouts: int, crashes: int) -> str:
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


def ended_line(status: str, totals: dict, results: Path) -> str:
    """The run's last console line: where its records went and where its results are."""
    unconsumed = "unknown" if totals["unconsumed"] is None else f"{totals['unconsumed']:,}"
    in_doubt = f", in doubt {totals['in_doubt']:,} (a lost worker's consumers)" if totals["in_doubt"] else ""
    return (
        f"run {status}: sent {totals['sent']:,} (acked {totals['acked']:,}), received {totals['received']:,}, "
        f"lost {totals['lost']:,}, unconsumed {unconsumed}{in_doubt}, "
        f"duplicates {totals['duplicates']:,}; results in {results}"
    )
