"""The run's journal: every worker report as it arrives, so that a coordinator killed mid-run (kill -9,
out of memory) loses nothing measured. `dimster summarize` replays it (recover.py) to close the
account and to write the metrics not yet in the Parquet files.

`journal.msgpack` in the bundle is a stream of msgpack records, each written by one `write` call to a
file opened for appending (in the operating system's hands at once, no buffer of ours):
- `["start", {"topics": {topic: partitions}, "groups": {group: {kind, topic, partitions}}}]`: before
  the workers start;
- `["load", load_started]`: load starts (epoch s);
- `["report", phase, report]`: a worker's report (`phase` None before load: not a metrics row);
- `["flushed"]`: every report before it is in the Parquet files;
- `["lost", client ids, last heard]`: a worker was lost, with these clients.
A run that records its end removes its journal: run.json and the Parquet files hold it all then."""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

from dimster.kafka.groups import GroupSpec
from dimster.worker.protocol import IntervalReport
from dimster.worker.wire import from_wire, to_wire

JOURNAL = "journal.msgpack"


class RunJournal:
    def __init__(self, folder: Path):
        self.path = folder / JOURNAL
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _write(self, record: list) -> None:
        if self._fd is not None:
            os.write(self._fd, msgpack.packb(record, use_bin_type=True))

    def start(self, topics: list[str], partitions: int, groups: dict[str, GroupSpec]) -> None:
        specs = {group: spec.to_json() for group, spec in groups.items()}
        self._write(["start", {"topics": dict.fromkeys(topics, partitions), "groups": specs}])

    def load(self, load_started: float) -> None:
        self._write(["load", load_started])

    def report(self, report: IntervalReport, phase: str | None) -> None:
        self._write(["report", phase, to_wire(IntervalReport, report)])

    def flushed(self) -> None:
        self._write(["flushed"])

    def lost(self, clients: list[str], last_heard: float) -> None:
        self._write(["lost", clients, last_heard])

    def remove(self) -> None:
        """The run recorded its end: the journal has nothing left to tell."""
        self.close()
        self.path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_journal(path: Path) -> Iterator[list[Any]]:
    """The journal's records in order; reports as IntervalReports. A record cut short by the crash (the
    last one) ends the stream."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=64 * 2**20)
    with path.open("rb") as journal:
        while chunk := journal.read(1 << 20):
            unpacker.feed(chunk)
            for record in unpacker:
                if record and record[0] == "report":
                    record[2] = from_wire(IntervalReport, record[2])
                yield record
