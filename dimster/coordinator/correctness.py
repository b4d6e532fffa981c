"""The correctness plan: a steady run judged at its end. The verdict comes from its totals: every
acknowledged record consumed (or still within its group's reach: not consumed is not lost), none
corrupt, none out of order, and no duplicates unless the mode allows them."""

from dimster.coordinator.plans import RunView, SteadyPlan
from dimster.workload.model import Correctness


def correctness_verdict(settings: Correctness, totals: dict, consumer_type: str) -> dict:
    """run.json's `mode` of a correctness run: the counts, whether it passed, and why not."""
    checks = {
        "lost": totals.get("lost") or 0,
        "corrupt": totals.get("corrupt") or 0,
        "out_of_order": totals.get("out_of_order") or 0,
        "duplicates": totals.get("duplicates") or 0,
        "in_doubt": totals.get("in_doubt") or 0,
    }
    failing = {name: count for name, count in checks.items() if count}
    if settings.allow_duplicates:
        failing.pop("duplicates", None)
    reasons = [f"{count:,} {name.replace('_', ' ')}" for name, count in failing.items()]
    if totals.get("unconsumed") is None:
        reasons.append("the groups' positions are unknown: loss cannot be told from not consumed")
    return {
        "type": settings.type,
        "passed": not reasons,
        "reasons": reasons,
        **checks,
        "unconsumed": totals.get("unconsumed"),
        # consumer groups keep each partition's order; share groups do not promise one
        "order_checked": consumer_type == "CONSUMER_GROUP",
        "allow_duplicates": settings.allow_duplicates,
    }


class CorrectnessPlan(SteadyPlan):
    """A steady run whose producers write checksummed bodies; its result is the verdict."""

    name = "correctness"

    def __init__(self, settings: Correctness, consumer_type: str):
        self.settings = settings
        self.consumer_type = consumer_type

    def result(self, totals: dict | None = None, run: RunView | None = None) -> dict | None:
        if totals is None or run is None:
            return None
        totals.update(corrupt=run.corrupt, out_of_order=run.out_of_order)
        return correctness_verdict(self.settings, totals, self.consumer_type)


def verdict_line(verdict: dict) -> str:
    """The console's line of a passed verdict: what was checked."""
    checked = "loss, corruption, order, duplicates" if verdict["order_checked"] else "loss, corruption, duplicates"
    return f"correctness passed ({checked})"
