"""A share consumer's watch over the records a crashed consumer of its group held: each one's time from
the crash to its redelivery, when this consumer receives it again, also before it heard of the crash."""

import time

import numpy as np

RECENT_REDELIVERIES = 20_000  # redelivered records a consumer remembers, for a crash it hears of late
# a crash's records are watched for this long (they come back once their locks run out, 30 s by
# default): a long run's crashes do not pile up in every consumer's memory
WATCH_FOR_S = 600.0
Record = tuple[int, int]  # (producer id, sequence)


RECENT = np.dtype([("at", "f8"), ("producer_id", "u4"), ("sequence", "u8")])


class RecentRecords:
    """The last `size` records of a kind a consumer received, the oldest overwritten first: (epoch s
    received, producer id, sequence) in one array, 20 bytes a record (a deque of tuples took some 140:
    300 consumers remembering 20,000 redeliveries each held 800 MB of a worker)."""

    def __init__(self, size: int) -> None:
        self.rows = np.zeros(size, RECENT)
        self.added = 0  # records ever added: the ring holds the last `size` of them

    def __len__(self) -> int:
        return min(self.added, len(self.rows))

    def add(self, at: float, producer_ids: np.ndarray, sequences: np.ndarray) -> None:
        size = len(self.rows)
        if len(sequences) > size:  # only the last `size` stay
            self.added += len(sequences) - size
            producer_ids, sequences = producer_ids[-size:], sequences[-size:]
        places = (self.added + np.arange(len(sequences))) % size
        self.rows["at"][places], self.rows["producer_id"][places], self.rows["sequence"][places] = (
            at, producer_ids, sequences
        )  # fmt: skip
        self.added += len(sequences)

    def since(self, at: float) -> list[tuple[float, int, int]]:
        """The records received at or after `at`: (received, producer id, sequence) each."""
        held = self.rows[: len(self)]
        return held[held["at"] >= at].tolist()


class CrashWatch:
    """The crashes this consumer watches for, and the redelivered records it received lately."""

    def __init__(self) -> None:
        self.redelivered = RecentRecords(RECENT_REDELIVERIES)
        self.watches: list[tuple[float, set[Record]]] = []  # (crashed at, records not back yet)

    def watch(self, keys: set[Record], crashed_at: float) -> list[float]:
        """Watch for a crash's records; returns the delays (µs) of those received already."""
        early = [(at, (pid, seq)) for at, pid, seq in self.redelivered.since(crashed_at) if (pid, seq) in keys]
        keys.difference_update(key for _, key in early)
        if keys:
            self.watches.append((crashed_at, keys))
        self._forget_old(time.time())
        return [(at - crashed_at) * 1e6 for at, _ in early]

    def received(self, received_at: float, producer_ids: np.ndarray, sequences: np.ndarray) -> list[float]:
        """Records received again (delivery count above 1): the delays (µs) of those a crash held."""
        self.redelivered.add(received_at, producer_ids, sequences)
        delays: list[float] = []
        if self.watches:
            keys = list(zip(producer_ids.tolist(), sequences.tolist(), strict=True))
            for crashed_at, watched in self.watches:
                found = [key for key in keys if key in watched]
                if found:
                    watched.difference_update(found)
                    delays += [max(0.0, (received_at - crashed_at) * 1e6)] * len(found)
        self._forget_old(received_at)
        return delays

    def _forget_old(self, now: float) -> None:  # done (every record back), or too old
        self.watches = [(at, watched) for at, watched in self.watches if watched and at >= now - WATCH_FOR_S]
