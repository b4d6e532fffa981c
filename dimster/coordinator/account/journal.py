"""The run's journal: every worker report as it arrives, so that a coordinator killed mid-run (kill -9,
out of memory) loses nothing measured. `dimster summarize` replays it (recover.py) to close the
account and to write the metrics not yet in the Parquet files.

Two files of msgpack records in the bundle, each record written by one `write` call to a file opened
for appending (in the operating system's hands at once, no buffer of ours):
- `journal.msgpack`, the whole run's account, small: each report without its histograms, delivery
  counts, client statistics and rebalances (counts and sequence ranges stay);
  - `["start", {"topics": {topic: partitions}, "groups": {group: {kind, topic, partitions}}}]`;
  - `["load", load_started]`: load starts (epoch s);
  - `["report", report]`;
  - `["lost", client ids, last heard]`: a worker was lost, with these clients;
- `journal-tail.msgpack`, the whole reports since the Parquet files were last written, emptied at
  each flush: `["report", phase, part, report]`, `part` the number of the Parquet part that was to
  hold it (a flush that the crash cut before the tail was emptied left it there: it is not written
  twice).
A run that records its end removes both: run.json and the Parquet files hold it all then."""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

from dimster.kafka.groups import GroupSpec
from dimster.worker.protocol import IntervalReport
from dimster.worker.wire import from_wire, to_wire

JOURNAL = "journal.msgpack"
TAIL = "journal-tail.msgpack"
NOT_ACCOUNT = ("histograms", "delivery_counts", "client_stats", "rebalances")  # kept by the tail only


def _append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


class RunJournal:
    def __init__(self, folder: Path):
        self.path, self.tail_path = folder / JOURNAL, folder / TAIL
        self._fds: tuple[int, int] | None = (_append(self.path), _append(self.tail_path))

    def _write(self, which: int, record: list) -> None:
        if self._fds is not None:
            os.write(self._fds[which], msgpack.packb(record, use_bin_type=True))

    def start(self, topics: list[str], partitions: int, groups: dict[str, GroupSpec]) -> None:
        specs = {group: spec.to_json() for group, spec in groups.items()}
        self._write(0, ["start", {"topics": dict.fromkeys(topics, partitions), "groups": specs}])

    def load(self, load_started: float) -> None:
        self._write(0, ["load", load_started])

    def report(self, report: IntervalReport, phase: str | None, part: int) -> None:
        """`phase` None: a report from before load, in no metrics file."""
        wire = to_wire(IntervalReport, report)
        if phase is not None:
            self._write(1, ["report", phase, part, wire])
        for client in wire["clients"]:
            for name in NOT_ACCOUNT:
                client.pop(name, None)
        self._write(0, ["report", wire])

    def flushed(self) -> None:
        """The Parquet files hold every report of the tail: empty it."""
        if self._fds is not None:
            os.ftruncate(self._fds[1], 0)

    def lost(self, clients: list[str], last_heard: float) -> None:
        self._write(0, ["lost", clients, last_heard])

    def remove(self) -> None:
        """The run recorded its end: the journal has nothing left to tell."""
        self.close()
        self.path.unlink(missing_ok=True)
        self.tail_path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._fds is not None:
            for fd in self._fds:
                os.close(fd)
            self._fds = None


def read_journal(path: Path) -> Iterator[list[Any]]:
    """A journal file's records in order, its reports as IntervalReports. A record cut short by the
    crash (the last one) ends the stream."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=64 * 2**20)
    with path.open("rb") as journal:
        while chunk := journal.read(1 << 20):
            unpacker.feed(chunk)
            for record in unpacker:
                if record and record[0] == "report":
                    record[-1] = from_wire(IntervalReport, record[-1])
                yield record
