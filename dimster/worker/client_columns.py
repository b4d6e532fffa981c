"""A client's interval, and a report's clients as columns (protocol 18).

A worker's clients each count what they did in an interval (`ClientInterval`). A report carries them
as columns (`ClientColumns`): their names as lists of strings, their whole-number counters as one
packed int64 array (a row per client), their real-valued ones as one packed float64 array, their
records by delivery count as one packed int64 array of (client, delivery count, records) triples
(protocol 22), and the structured rest (`ClientDetails`: failed sequences, statistics, rebalances, a
crash's held records) only for the clients that have any; a consumer's settled ranges and outcomes travel in
the report's groups (accounts.py, protocol 19). The coordinator sums a report's counters with numpy, a call per counter,
not a Python call per client and counter; code that wants the intervals one by one iterates the
columns (they are built back on first use)."""

import functools
import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from operator import attrgetter

import numpy as np

from dimster.worker.accounts import ACCOUNT, Account, GroupAccount, united
from dimster.worker.wire import Float64s, Int64s, Ranges


@dataclass(kw_only=True)
class ClientDetails(Account):
    """What of a client's interval is no single number: a report carries it only for a client that has
    any (ClientColumns.details). A consumer's Account (its settled ranges and outcomes) travels in the
    report's groups, merged with its group's other consumers' (accounts.take_accounts)."""

    failed_sequences: list[int] = field(default_factory=list)  # producers: sequences whose send failed
    crash_held: dict[int, Ranges] = field(default_factory=dict)  # a simulated crash's unacknowledged records
    # consumer groups: the member's rebalance callbacks, (epoch s on the coordinator's clock,
    # assigned | revoked | lost, partitions)
    rebalances: list[tuple[float, str, int]] = field(default_factory=list)
    client_stats: dict | None = None


@dataclass
class ClientInterval(ClientDetails):
    """What one client did in one interval (counts are deltas; client_stats is the latest snapshot)."""

    client_id: str
    role: str  # producer | consumer | share_consumer
    topic: str
    group: str = ""
    library: str = ""  # clientLibrary of the Kafka client: librdkafka | java
    # Which Kafka client of this load client ran (1, 2, ... as live changes rebuild it); 0 when the
    # interval saw a rebuild (two clients) or no client yet.
    generation: int = 0
    target_rate: float = 0.0
    sent: int = 0
    sent_bytes: int = 0
    acked: int = 0
    send_errors: int = 0
    next_sequence: int = 0  # producers: sequences 0..next_sequence-1 have been handed to the client
    received: int = 0
    received_bytes: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    polls: int = 0
    max_poll_records: int = 0
    max_poll_partitions: int = 0  # the most partitions one poll's records came from (flowControl)
    renewed: int = 0  # records whose acquisition lock was renewed (KIP-1222), once per renewal
    renewals_refused: int = 0
    lock_timeouts: int = 0  # acknowledgements refused because the record's lock had timed out
    ack_errors: int = 0  # acknowledgements refused for another reason, or never answered (in_doubt)
    crashed_at: float = 0.0  # a simulated crash (CrashConsumers): epoch s, coordinator's clock; 0: none
    redelivered_after_crash: int = 0  # records of a crashed consumer this one received again
    first_received_at: float = 0.0  # epoch s (coordinator's clock) of the interval's first and last
    last_received_at: float = 0.0  # polls that returned records; 0 when none did
    corrupt: int = 0  # correctness: records not written by dimster, or whose body checksum fails
    out_of_order: int = 0  # correctness, consumer groups: a producer's record below its predecessor
    # share consumers: records received by their delivery count (a report carries them as ClientColumns.deliveries)
    delivery_counts: dict[int, int] = field(default_factory=dict)


def _of_type(kind: type) -> tuple[str, ...]:
    hints = typing.get_type_hints(ClientInterval)
    details = {f.name for f in fields(ClientDetails)}
    return tuple(f.name for f in fields(ClientInterval) if f.name not in details and hints[f.name] is kind)


NAMES = _of_type(str)  # a list of strings each on the wire
if NAMES != ("client_id", "role", "topic", "group", "library"):  # ClientColumns' fields and check() name them
    raise ValueError(f"a client interval's names changed: {NAMES}")
COUNTS = _of_type(int)  # a row of the report's `counts` each, in this order (the protocol's number pins it)
REALS = _of_type(float)  # a row of its `reals`
DETAILS = tuple(f.name for f in fields(ClientDetails))
_counts_of, _reals_of, _details_of = attrgetter(*COUNTS), attrgetter(*REALS), attrgetter(*DETAILS)
EMPTY = ClientDetails()


def _ints() -> np.ndarray:
    return np.empty(0, np.int64)


@dataclass(eq=False)
class ClientColumns:
    """A report's clients: client i has the i-th name of each list, row i of `counts` (COUNTS' order)
    and of `reals` (REALS'), its records by delivery count in `deliveries`, and details[i] if it has any."""

    client_id: list[str] = field(default_factory=list)
    role: list[str] = field(default_factory=list)
    topic: list[str] = field(default_factory=list)
    group: list[str] = field(default_factory=list)
    library: list[str] = field(default_factory=list)
    counts: Int64s = field(default_factory=_ints)  # len(client_id) x len(COUNTS), row after row
    reals: Float64s = field(default_factory=lambda: np.empty(0))
    # (client, delivery count, records) triples, row after row: a client's records by their delivery count
    deliveries: Int64s = field(default_factory=_ints)
    details: dict[int, ClientDetails] = field(default_factory=dict)

    @classmethod
    def gather(cls, intervals: Iterable[ClientInterval]) -> "ClientColumns":
        intervals = list(intervals)
        counts = np.array([_counts_of(c) for c in intervals], np.int64).reshape(-1)
        reals = np.array([_reals_of(c) for c in intervals], np.float64).reshape(-1)
        triples = [(i, *pair) for i, c in enumerate(intervals) for pair in c.delivery_counts.items()]
        deliveries = np.array(triples, np.int64).reshape(-1)
        details: dict[int, ClientDetails] = {i: c for i, c in enumerate(intervals) if any(_details_of(c))}
        columns = cls(counts=counts, reals=reals, deliveries=deliveries, details=details)
        for name in NAMES:
            setattr(columns, name, [getattr(c, name) for c in intervals])
        columns.__dict__["intervals"] = intervals  # they are what the columns would build back
        return columns

    def __len__(self) -> int:
        return len(self.client_id)

    def __iter__(self) -> Iterator[ClientInterval]:
        return iter(self.intervals)

    def __getitem__(self, i: int) -> ClientInterval:
        return self.intervals[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ClientColumns | list):
            return self.intervals == list(other)
        return NotImplemented

    def check(self) -> None:
        """A ValueError unless the columns agree with each other."""
        n = len(self.client_id)
        if not n == len(self.role) == len(self.topic) == len(self.group) == len(self.library):
            raise ValueError("client name columns of different lengths")
        if len(self.counts) != n * len(COUNTS) or len(self.reals) != n * len(REALS):
            raise ValueError(f"client counters that are not {len(COUNTS)} whole and {len(REALS)} real a client")
        if any(not 0 <= i < n for i in self.details):
            raise ValueError(f"details of a client beyond the report's {n}")
        if len(self.deliveries) % 3:
            raise ValueError("delivery counts that are not (client, delivery count, records) triples")
        if (owners := self.deliveries[::3].tolist()) and not (min(owners) >= 0 and max(owners) < n):
            raise ValueError(f"delivery counts of a client beyond the report's {n}")

    @functools.cached_property
    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        """The counters as a row per client: whole ones (a column per COUNTS), real ones (per REALS)."""
        n = len(self.client_id)
        return self.counts.reshape(n, len(COUNTS)), self.reals.reshape(n, len(REALS))

    def delivery_rows(self, first: int = 0) -> np.ndarray:
        """The delivery counts, a row per client and delivery count: the client (its index plus `first`),
        the delivery count, the records."""
        rows = self.deliveries.reshape(-1, 3)
        return rows + np.array((first, 0, 0)) if first else rows

    def count(self, name: str) -> np.ndarray:
        """Each client's counter `name` (one of COUNTS), in the clients' order."""
        return self.tables[0][:, COUNT_INDEX[name]]

    def real(self, name: str) -> np.ndarray:
        """Each client's value `name` (one of REALS), in the clients' order."""
        return self.tables[1][:, REAL_INDEX[name]]

    def detail(self, i: int) -> ClientDetails:
        """Client i's details (EMPTY when it has none: do not change it)."""
        return self.details.get(i, EMPTY)

    @functools.cached_property
    def intervals(self) -> list[ClientInterval]:
        """The clients' intervals, one by one."""
        counts, reals = (table.tolist() for table in self.tables)
        deliveries: dict[int, dict[int, int]] = {}
        for client, count, records in self.delivery_rows().tolist():
            deliveries.setdefault(client, {})[count] = records
        built = []
        for i, names in enumerate(zip(*(getattr(self, name) for name in NAMES), strict=True)):
            values = dict(zip(COUNTS, counts[i], strict=True)) | dict(zip(REALS, reals[i], strict=True))
            values["delivery_counts"] = deliveries.get(i, {})
            if (details := self.details.get(i)) is not None:
                values |= {name: getattr(details, name) for name in DETAILS}
            built.append(ClientInterval(*names, **values))
        return built


COUNT_INDEX = {name: i for i, name in enumerate(COUNTS)}
REAL_INDEX = {name: i for i, name in enumerate(REALS)}


def take_accounts(intervals: list[ClientInterval]) -> tuple[dict[str, GroupAccount], list[ClientInterval]]:
    """Each group's account of the interval, from its consumers' intervals (accounts.py); every group
    of a consumer has one, an idle one too (its clock's end moves). With it the intervals as the report
    carries them: a consumer's with its account emptied (a copy; the ranges travel once, in the groups)."""
    accounts: dict[str, GroupAccount] = {}
    settling: dict[str, list[ClientInterval]] = {}  # group -> its consumers with ranges
    carried = []
    for c in intervals:
        if c.role != "producer":
            account = accounts.setdefault(c.group, GroupAccount())
            account.received += c.received
            if any(getattr(c, name) for name in ACCOUNT):
                settling.setdefault(c.group, []).append(c)
                c = replace_accounts(c)
        carried.append(c)
    for group, consumers in settling.items():
        united(consumers, accounts[group])
    return accounts, carried


def replace_accounts(c: ClientInterval) -> ClientInterval:
    """A shallow copy of `c` with its account emptied, at a tenth of copy.copy's cost."""
    emptied = object.__new__(ClientInterval)
    emptied.__dict__.update(c.__dict__, **{name: {} for name in ACCOUNT})
    return emptied


def columns_and_accounts(intervals: list[ClientInterval]) -> tuple[ClientColumns, dict[str, GroupAccount]]:
    """What a report carries of its clients' intervals: their columns, and their ranges merged per group."""
    accounts, carried = take_accounts(intervals)
    return ClientColumns.gather(carried), accounts
