"""A share consumer's records between receipt and the broker's answer to their acknowledgement: what
each one is (producer id, sequence number), the outcome it was acknowledged with (ACCEPT in implicit
mode), its delivery count and whether that was its last delivery, by its key (partition and offset, see
dimster.clients.record_keys). A record counts as settled only once the broker has answered; kept
as one structured array, so that a poll costs a few numpy calls whatever its size."""

from collections import Counter
from typing import Any

import numpy as np

from dimster.clients import ACCEPT, LOCK_LAPSED, REFUSED, REJECT, RELEASE
from dimster.worker.clients.load_client import distinct
from dimster.worker.protocol import ClientInterval

ROW = np.dtype(
    [
        ("key", "i8"),
        ("producer_id", "u4"),
        ("sequence", "u8"),
        ("outcome", "i1"),
        ("delivery", "u2"),
        ("last", "?"),
        ("ours", "?"),
    ]
)


def rows_of(
    keys: np.ndarray,
    ours: np.ndarray,
    headers: np.ndarray,
    outcomes: np.ndarray | None,
    deliveries: np.ndarray,
    limit: int,
) -> np.ndarray:
    """A poll's records as rows: `headers` unpacked (payload.unpack_headers), `ours` the records with
    dimster's header, `outcomes` per record (None: implicit mode, every record accepted), `deliveries`
    their delivery counts (`limit`: the group's delivery count limit)."""
    rows = np.empty(len(keys), ROW)
    rows["key"], rows["ours"], rows["delivery"], rows["last"] = keys, ours, deliveries, deliveries >= limit
    rows["producer_id"], rows["sequence"] = headers["producer_id"], headers["sequence"]
    rows["outcome"] = ACCEPT if outcomes is None else outcomes
    return rows


def _matches(keys: np.ndarray, among: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of `keys`: whether it is among `among`, and where (an index into `among`)."""
    order = np.argsort(among, kind="stable")
    ranked = among[order]
    at = np.minimum(np.searchsorted(ranked, keys), len(ranked) - 1)
    return ranked[at] == keys, order[at]


def _same(keys: np.ndarray, others: np.ndarray) -> bool:
    """Whether two arrays of distinct keys hold the same keys."""
    return keys.tobytes() == others.tobytes() or np.array_equal(np.sort(keys), np.sort(others))


class Unsettled:
    """Rows of records received and not yet answered for."""

    def __init__(self) -> None:
        self.rows = np.empty(0, ROW)
        # keys of records that came back before their previous delivery's acknowledgement was answered:
        # that answer is still to come and is not the new delivery's (it comes first, by key alone)
        self.stale: Counter[int] = Counter()

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, rows: np.ndarray) -> np.ndarray:
        """Keep `rows` until answered. Returns the rows they replace: records that came back before
        their previous delivery's acknowledgement was answered (none, as a rule: an answer comes in
        the response that would carry the record again)."""
        if not len(self.rows):
            self.rows = rows
            return self.rows[:0]
        again, _ = _matches(self.rows["key"], rows["key"])
        replaced = self.rows[again]
        self.rows = np.concatenate((self.rows[~again], rows))
        self.stale.update(replaced["key"].tolist())
        return replaced

    def answered(self, keys: np.ndarray, status: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Take the rows the broker answered for: (those rows, the status of each). Answers for
        records no longer kept (taken already) are left out, and so is the first answer for a record
        that came back unanswered (add): it answers the delivery before."""
        if self.stale:
            keys, status = self._without_stale(keys, status)
        rows = self.rows
        if not len(rows) or not len(keys):
            return rows[:0], status[:0]
        if len(keys) == len(rows) and not status.any() and _same(keys, rows["key"]):
            self.rows = rows[:0]  # the usual answer: every record of the last poll took effect
            return rows, status
        found, at = _matches(rows["key"], keys)
        if found.all():
            rows, self.rows = self.rows, self.rows[:0]
            return rows, status[at]
        rows, self.rows = self.rows[found], self.rows[~found]
        return rows, status[at[found]]

    def _without_stale(self, keys: np.ndarray, status: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The answers less the first one for each key still owed an answer for an earlier delivery
        (a broker that stalled or lost its leadership answers late, after the record came back)."""
        keep = np.ones(len(keys), bool)
        for at in np.flatnonzero(np.isin(keys, list(self.stale))).tolist():
            key = int(keys[at])
            if self.stale[key]:
                keep[at] = False
                self.stale[key] -= 1
        self.stale = +self.stale  # drops the keys whose answers all came
        return keys[keep], status[keep]

    def take(self, keys: np.ndarray) -> np.ndarray:
        """Take the rows of these records, answered or not (the consumer knows their fate itself)."""
        if not len(self.rows) or not len(keys):
            return self.rows[:0]
        found, _ = _matches(self.rows["key"], keys)
        rows, self.rows = self.rows[found], self.rows[~found]
        return rows

    def take_all(self) -> np.ndarray:
        rows, self.rows = self.rows, self.rows[:0]
        return rows


def settle(by_producer: dict[int, list[Any]], records: np.ndarray) -> None:
    """Add the records' sequence numbers under their producers (`records`: headers or rows). `by_producer`
    is a field of the interval: sequence numbers while it is filled, ranges once take_interval() has
    turned them so."""
    producer_ids, sequences = records["producer_id"], records["sequence"]
    for producer_id in distinct(producer_ids):
        by_producer.setdefault(producer_id, []).extend(sequences[producer_ids == producer_id].tolist())


def receive(interval: ClientInterval, unsettled: Unsettled, rows: np.ndarray, headers: np.ndarray) -> np.ndarray:
    """A poll's records (`rows`, rows_of) at receipt: counted by delivery count, the ones received again
    noted, all kept until answered. Returns which are timed now (all of ours but those released for
    another delivery: they are timed when they settle)."""
    deliveries, ours = rows["delivery"], rows["ours"]
    for count, times_seen in Counter(deliveries.tolist()).items():
        interval.delivery_counts[count] = interval.delivery_counts.get(count, 0) + times_seen
    again = ours & (deliveries > 1)
    if again.any():  # as a rule none: a poll of first deliveries costs no more than it did
        settle_by_delivery(interval.received_again, headers[again], deliveries[again])
    replaced = unsettled.add(rows)
    interval.ack_errors += len(replaced)  # came back with their acknowledgement unanswered
    return ours & ~((rows["outcome"] == RELEASE) & ~rows["last"])


def settle_by_delivery(by_key: dict[tuple[int, int], list[Any]], records: np.ndarray, deliveries: np.ndarray) -> None:
    """Add the records' sequence numbers under (producer, delivery count), as settle() does by producer."""
    keys = records["producer_id"].astype(np.int64) << 16 | deliveries
    for key in distinct(keys):
        by_key.setdefault((int(key) >> 16, int(key) & 0xFFFF), []).extend(records["sequence"][keys == key].tolist())


def archive(interval: ClientInterval, records: np.ndarray) -> None:
    """Records the broker archived (their last delivery ran out or was released): settled, as archived."""
    settle(interval.settled, records)
    settle(interval.settled_archived, records)


def count_answered(interval: ClientInterval, rows: np.ndarray, status: np.ndarray) -> None:
    """Count records the broker answered for: one whose acknowledgement took effect by its outcome,
    settled unless released for another delivery; one whose lock had run out as a lock time-out: it
    comes back (on its last delivery the broker archives it instead). One answered with another error
    (a broker restarting, a leader moving) may have taken effect or not: an acknowledgement error, and
    in doubt, never counted as an outcome it may not have had. One that comes back settles by its later
    delivery (coordinator/account/share_outcomes.py); one that does not ends the run in doubt, by name."""
    if status.any():  # not all SETTLED
        lapsed, refused = status == LOCK_LAPSED, status == REFUSED
        interval.lock_timeouts += int(np.count_nonzero(lapsed))
        interval.ack_errors += int(np.count_nonzero(refused))
        archive(interval, rows[lapsed & rows["last"] & rows["ours"]])
        doubtful = refused & rows["ours"]
        settle_by_delivery(interval.in_doubt, rows[doubtful], rows["delivery"][doubtful])
        rows = rows[~(lapsed | refused)]
    outcome, ours = rows["outcome"], rows["ours"]
    if not outcome.any():  # all accepted (ACCEPT is 0): implicit mode, as a rule
        interval.accepted += len(rows)
        settle(interval.settled, rows if ours.all() else rows[ours])
        return
    released, rejected = outcome == RELEASE, outcome == REJECT
    n_released, n_rejected = int(np.count_nonzero(released)), int(np.count_nonzero(rejected))
    interval.accepted += len(rows) - n_released - n_rejected
    if n_released or n_rejected:
        interval.released += n_released
        interval.rejected += n_rejected
        last = rows["last"]
        settle_by_delivery(interval.settled_rejected, rows[ours & rejected], rows["delivery"][ours & rejected])
        # a released record comes back (not settled yet) unless it used its last delivery: then the
        # broker archives it
        settle(interval.settled_archived, rows[ours & released & last])
        ours = ours & ~(released & ~last)
    settle(interval.settled, rows[ours])
