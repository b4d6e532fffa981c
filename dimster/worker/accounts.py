"""What a group's consumers settled in an interval, merged into one account per group (protocol 19).

Each consumer counts the records it settled, and a share group's outcomes (rejected, archived,
received again, in doubt), as sequence ranges per producer (`Account`, a part of its interval). The
coordinator keeps these per group, never per consumer: the run's settled set is per group and
producer, its outcomes per group, producer and delivery. So a report carries one `GroupAccount` a
group, the union of its consumers' ranges, made where the report is made (`take_accounts`), and the
coordinator adds a group's ranges once a report instead of once for each of its consumers. A record
two of the report's consumers both settled is in the union once and counted in `duplicates`, so the
run's duplicates and its distinct settled records come out as they would from each consumer's ranges."""

from dataclasses import dataclass, field, fields
from typing import Protocol, TypeVar

from dimster.worker.wire import Ranges


@dataclass(kw_only=True)
class Account:
    """Sequence ranges of the records a consumer (or a group's consumers) settled in an interval."""

    settled: dict[int, Ranges] = field(default_factory=dict)  # producer id -> sequence ranges
    # share groups: of the settled records, those rejected, by (producer id, delivery count), and those
    # the broker archived (released or timed out on their last delivery), by producer id; the rest were
    # accepted. Values: sequence ranges.
    settled_rejected: dict[tuple[int, int], Ranges] = field(default_factory=dict)
    settled_archived: dict[int, Ranges] = field(default_factory=dict)
    # share groups: records received on a delivery after their first, by (producer id, delivery count):
    # a reject answered as settled on an earlier delivery did not take effect (see share_outcomes.py)
    received_again: dict[tuple[int, int], Ranges] = field(default_factory=dict)
    # share groups: records whose acknowledgement may or may not have taken effect (answered with an
    # error, or never answered: the broker went away), by (producer id, delivery count). Not settled:
    # one that comes back settles by its later delivery; one that does not ends the run in doubt.
    in_doubt: dict[tuple[int, int], Ranges] = field(default_factory=dict)


ACCOUNT = tuple(f.name for f in fields(Account))
C = TypeVar("C", bound="Consumed")


@dataclass(kw_only=True)
class GroupAccount(Account):
    """A group's consumers' accounts of one report, merged: their ranges' union; `received`, the records
    they received (the group's clock of outcome_folds.py runs on it); `duplicates`, records settled by
    more than one of them (not in the union twice)."""

    received: int = 0
    duplicates: int = 0


class Consumed(Protocol):
    """What take_accounts reads of a client's interval (worker/client_columns.py's ClientInterval),
    beside its Account's fields."""

    role: str
    group: str
    received: int


def union(parts: list[Ranges]) -> tuple[Ranges, int]:
    """The union of several lists of ranges, in order and merged where they touch; and how many values
    were in more than one of them (or twice in one)."""
    if len(parts) == 1:
        return parts[0], 0
    pairs = sorted(pair for part in parts for pair in part)
    merged: list[tuple[int, int]] = []
    total = overlap = 0
    for first, last in pairs:
        total += last - first + 1
        if merged and first <= merged[-1][1] + 1:
            low, high = merged[-1]
            overlap += max(0, min(last, high) - first + 1)
            merged[-1] = (low, max(high, last))
        else:
            merged.append((first, last))
    return Ranges(merged), overlap


def take_accounts(intervals: list[C]) -> tuple[dict[str, GroupAccount], list[C]]:
    """Each group's account of the interval, from its consumers' intervals (role other than producer);
    every group of a consumer has one, an idle one too (its clock's end moves). With it the intervals
    as the report carries them: a consumer's with its account emptied (a copy; the ranges travel once,
    in the groups)."""
    parts: dict[str, dict[str, dict]] = {}
    accounts: dict[str, GroupAccount] = {}
    carried = []
    for c in intervals:
        if c.role == "producer":
            carried.append(c)
            continue
        merged = accounts.get(c.group)
        if merged is None:
            merged = accounts[c.group] = GroupAccount()
            parts[c.group] = {name: {} for name in ACCOUNT}
        merged.received += c.received
        if any(getattr(c, name) for name in ACCOUNT):
            for name in ACCOUNT:
                gathered = parts[c.group][name]
                for key, ranges in getattr(c, name).items():
                    gathered.setdefault(key, []).append(ranges)
            emptied = object.__new__(type(c))  # a shallow copy, at a tenth of copy.copy's cost
            emptied.__dict__.update(c.__dict__, **{name: {} for name in ACCOUNT})
            c = emptied
        carried.append(c)
    for group, merged in accounts.items():
        for name, gathered in parts[group].items():
            joined = {}
            for key, ranges in gathered.items():
                joined[key], overlap = union(ranges)
                if name == "settled":
                    merged.duplicates += overlap
            setattr(merged, name, joined)
    return accounts, carried
