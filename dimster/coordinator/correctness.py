"""The verdict of a correctness run, from its totals: every acknowledged record consumed (or still
within its group's reach: not consumed is not lost), none corrupt, none out of order, and no
duplicates unless the mode allows them."""

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
