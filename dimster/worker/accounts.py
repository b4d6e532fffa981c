"""What a group's consumers settled in an interval, merged into one account per group (protocol 19).

Each consumer counts the records it settled, and a share group's outcomes (rejected, archived,
received again, in doubt), as sequence ranges per producer (`Account`, a part of its interval). The
coordinator keeps these per group, never per consumer: the run's settled set is per group and
producer, its outcomes per group, producer and delivery. So a report carries one `GroupAccount` a
group, the union of its consumers' ranges, made where the report is made (client_columns.take_accounts), and the
coordinator adds a group's ranges once a report instead of once for each of its consumers. A record
two of the report's consumers both settled is in the union once and counted in `duplicates`, so the
run's duplicates and its distinct settled records come out as they would from each consumer's ranges."""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from itertools import chain

from dimster.metrics.sequences import RangeSet
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


@dataclass(kw_only=True)
class GroupAccount(Account):
    """A group's consumers' accounts of one report, merged: their ranges' union; `received`, the records
    they received (the group's clock of outcome_folds.py runs on it); `duplicates`, records settled by
    more than one of them (not in the union twice)."""

    received: int = 0
    duplicates: int = 0


def union(parts: list[Ranges]) -> tuple[Ranges, int]:
    """The union of several lists of ranges, in order and merged where they touch; and how many values
    were in more than one of them (or twice in one)."""
    if len(parts) == 1:
        return parts[0], 0
    merged = RangeSet()
    twice = sum(merged.add_many(part) for part in parts)
    return Ranges(merged.ranges()), twice


def united(accounts: Sequence[Account], into: GroupAccount) -> GroupAccount:
    """`into` with the accounts' ranges, united (union), in place of its own; the settled records in
    more than one of them added to its duplicates."""
    for name in ACCOUNT:
        joined = {}
        for key, parts in _gathered(accounts, name).items():
            joined[key], twice = union(parts)
            if name == "settled":
                into.duplicates += twice
        setattr(into, name, joined)
    return into


def side_by_side(accounts: Sequence[Account], into: GroupAccount) -> GroupAccount:
    """`into` with each of the accounts' ranges of a key, one list after another (not united: for a
    reader that counts a record in two of them itself, as the coordinator's aggregate does)."""
    fields_of = [vars(account) for account in accounts]
    for name in ACCOUNT:
        parts = [own[name] for own in fields_of if own[name]]
        joined: dict = {}
        for by_key in parts:  # a key in one part only: its ranges as they are
            joined.update(by_key)
        if sum(map(len, parts)) > len(joined):  # keys in several parts: their ranges one list after another
            for key in [key for key, times in Counter(chain.from_iterable(parts)).items() if times > 1]:
                joined[key] = Ranges(chain.from_iterable(by_key[key] for by_key in parts if key in by_key))
        setattr(into, name, joined)
    return into


def _gathered(accounts: Sequence[Account], name: str) -> dict:
    """Each key's ranges of the accounts' field `name`, a list a key, in the accounts' order."""
    gathered: dict = {}
    for account in accounts:
        for key, ranges in getattr(account, name).items():
            gathered.setdefault(key, []).append(ranges)
    return gathered
