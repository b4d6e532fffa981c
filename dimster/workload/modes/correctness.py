"""The correctness plan: a steady run judged at its end. The verdict comes from its totals: every
acknowledged record consumed (or still within its group's reach: not consumed is not lost), none
corrupt, none out of order, no duplicates unless the mode allows them, and with a dead-letter queue
every rejected or archived record in its topic exactly once."""

from typing import Literal

from pydantic import Field

from dimster.workload.modes import steady
from dimster.workload.modes.base import Panel, RunPlan, RunView, SteadyPlan, Workload
from dimster.workload.payload import HEADER_SIZE
from dimster.workload.strict import Strict

NAME = "correctness"
CHECKSUM_SIZE = 4  # the body starts with the CRC-32 of the rest
CHECKSUMS = True  # producers write checksummed bodies, consumers check them


class Correctness(Strict):
    """Every record checked: payload checksums (corruption), per-partition order of each producer's
    records (consumer groups), loss and duplicates. A failed verdict exits with its own code."""

    type: Literal["correctness"]
    allow_duplicates: bool = Field(False, alias="allowDuplicates")


def correctness_verdict(settings: Correctness, totals: dict, consumer_type: str) -> dict:
    """run.json's `mode` of a correctness run: the counts, whether it passed, and why not."""
    checks = {
        "lost": totals.get("lost") or 0,
        "corrupt": totals.get("corrupt") or 0,
        "out_of_order": totals.get("out_of_order") or 0,
        "duplicates": totals.get("duplicates") or 0,
        "in_doubt": totals.get("in_doubt") or 0,
        # a dead-letter queue: each rejected or archived record in its topic exactly once
        "dead_letter_missing": totals.get("dead_letter_missing") or 0,
        "dead_letter_duplicates": totals.get("dead_letter_duplicates") or 0,
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


def plan(workload: Workload) -> RunPlan:
    assert isinstance(workload.mode, Correctness)
    return CorrectnessPlan(workload.mode, workload.consumer_type)


def problem(workload: Workload) -> str | None:
    """What the rest of the workload must be for this mode (None: nothing)."""
    if workload.message_size < HEADER_SIZE + CHECKSUM_SIZE:
        return f"mode correctness needs messageSize of at least {HEADER_SIZE + CHECKSUM_SIZE} (checksum)"
    return None


def line(mode: dict) -> str:
    verdict = "passed" if mode.get("passed") else "FAILED: " + ", ".join(mode.get("reasons") or [])
    return f"correctness {verdict}"


def panel(mode: dict) -> Panel | None:
    return None


load_seconds = steady.load_seconds
