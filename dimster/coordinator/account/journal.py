"""The run's journal: every worker report as it arrives, so that a coordinator killed mid-run (kill -9,
out of memory) loses nothing measured. `dimster summarize` replays it (recover.py) to close the
account and to write the metrics not yet in the Parquet files.

Two files of msgpack records in the bundle, written to files opened for appending (in the operating
system's hands at once, no buffer of ours), the reports a pass of the run's loop takes in by one
`writev` a file before any of them is taken in:
- `journal.msgpack`, the whole run's account, small: each report without its histograms, delivery
  counts, client statistics and rebalances (counts and sequence ranges stay);
  - `["start", {"topics": {topic: partitions}, "groups": {group: {kind, topic, partitions}},
    "protocol": N}]`: its reports are in the wire's form of protocol N (worker/protocol.py);
  - `["load", load_started]`: load starts (epoch s);
  - `["report", report]`;
  - `["lost", client ids, stopped by, worker, its consumers' groups]`: a worker was lost, with these clients;
- `journal-tail-NNNNN.msgpack`, the whole reports that Parquet part NNNNN is to hold, each in the
  bytes it came in, removed once that part is written (behind the run's loop: results/metrics_writer.py):
  `["report", phase, part, report]` (a part that the crash cut before its tail was removed left it
  there: recovery finds the part written and does not write its reports twice).
A run that records its end removes both: run.json and the Parquet files hold it all then."""

import mmap
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import msgspec

from dimster.kafka.groups import GroupSpec
from dimster.worker.accounts import GroupAccount
from dimster.worker.protocol import PROTOCOL_VERSION, IntervalReport, report_bytes
from dimster.worker.wire import from_wire, to_wire

JOURNAL = "journal.msgpack"
TAIL = "journal-tail-{part:05d}.msgpack"
TAILS = "journal-tail*.msgpack"  # also an older dimster's one journal-tail.msgpack
TAIL_PART = re.compile(r"journal-tail-(\d+)\.msgpack")
# kept by the tail only, with its report's histograms: its clients' delivery counts, and of a client's details
NOT_ACCOUNT_CLIENTS = ("deliveries",)
NOT_ACCOUNT = ("client_stats", "rebalances")
TAIL_RECORD = b"\x94" + msgpack.packb("report")  # a tail record: an array of 4, its kind first
ACCOUNT_RECORD = b"\x92" + msgpack.packb("report")  # journal.msgpack's: an array of 2, its kind first
IOV_MAX = 1024  # pieces a writev takes (Linux's limit)
MAP = msgpack.Packer()  # its pack_map_header: the start of a map whose pairs are bytes already packed


def _append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def account_bytes(whole: bytes) -> bytes:
    """A report's msgpack bytes (a map) without its histograms, its clients' NOT_ACCOUNT_CLIENTS and
    their details' NOT_ACCOUNT: the other values' bytes as they are, found by msgpack without building
    them; only the details (the few clients that have any) are read and written again."""
    report = msgpack.Unpacker(max_buffer_size=len(whole) + 1)
    report.feed(whole)
    kept = []
    for _ in range(report.read_map_header()):
        start = report.tell()
        key = report.unpack()
        if key == "histograms":
            report.skip()
        elif key == "clients":
            kept.append(whole[start : report.tell()] + _clients_account(report, whole))
        else:
            report.skip()
            kept.append(whole[start : report.tell()])
    return MAP.pack_map_header(len(kept)) + b"".join(kept)


def _clients_account(report: msgpack.Unpacker, whole: bytes) -> bytes:
    """The clients' map at `report`'s position, without NOT_ACCOUNT_CLIENTS and its details' NOT_ACCOUNT."""
    entries = report.read_map_header()
    kept = []
    for _ in range(entries):
        start = report.tell()
        key = report.unpack()
        value = report.tell()
        report.skip()
        if key in NOT_ACCOUNT_CLIENTS:
            continue
        if key != "details":
            kept.append(whole[start : report.tell()])
            continue
        details = msgspec.msgpack.decode(whole[value : report.tell()])  # a client's index -> its details
        for detail in details.values():
            for name in NOT_ACCOUNT:
                detail.pop(name, None)
        kept.append(msgpack.packb(key) + msgpack.packb(details, use_bin_type=True))
    return MAP.pack_map_header(len(kept)) + b"".join(kept)


def _encoded(report: IntervalReport) -> bytes:
    """A report not from the wire (an in-memory fake's), in the wire's bytes."""
    return msgpack.packb(to_wire(IntervalReport, report), use_bin_type=True)


def tail_files(folder: Path) -> list[Path]:
    """The journal's tail files, in the order of their parts."""
    return sorted(folder.glob(TAILS))


class RunJournal:
    def __init__(self, folder: Path):
        self.folder, self.path = folder, folder / JOURNAL
        self.tail_part = 0  # the part whose tail file is open
        self._fds: list[int] | None = [_append(self.path), _append(self.tail_path)]

    @property
    def tail_path(self) -> Path:
        return self.folder / TAIL.format(part=self.tail_part)

    def _write(self, which: int, record: list) -> None:
        self._write_bytes(which, msgpack.packb(record, use_bin_type=True))

    def _write_bytes(self, which: int, data: bytes) -> None:
        if self._fds is not None:
            os.write(self._fds[which], data)

    def start(self, topics: list[str], partitions: int, groups: dict[str, GroupSpec]) -> None:
        specs = {group: spec.to_json() for group, spec in groups.items()}
        start = {"topics": dict.fromkeys(topics, partitions), "groups": specs, "protocol": PROTOCOL_VERSION}
        self._write(0, ["start", start])

    def load(self, load_started: float) -> None:
        self._write(0, ["load", load_started])

    def report(self, report: IntervalReport, phase: str | None, part: int, received: bytes = b"") -> None:
        """`phase` None: a report from before load, in no metrics file. `received`: the Reported message
        it came in, whose report's bytes the tail keeps as they are (no second encoding)."""
        self.reports([(report, phase, part, received)])

    def reports(self, taken: list[tuple[IntervalReport, str | None, int, bytes]]) -> None:
        """Several reports (report's arguments each), in order: one write a file (a vector of their
        records' pieces, none copied into one), as many as a pass of the run's loop takes in. The
        account first: a crash between the two writes leaves the pass's counts whole, its metrics
        rows short (never rows the account does not count)."""
        wholes = [report_bytes(received) or _encoded(report) for report, _, _, received in taken]
        self._write_vector(0, [piece for whole in wholes for piece in (ACCOUNT_RECORD, account_bytes(whole))])
        tail: list[bytes] = []
        for (_, phase, part, _), whole in zip(taken, wholes, strict=True):
            if phase is None:  # a report from before load: in no metrics file
                continue
            if part != self.tail_part and self._fds is not None:
                self._write_vector(1, tail)  # the part's own reports to its own file
                tail = []
                os.close(self._fds[1])
                self.tail_part = part
                self._fds[1] = _append(self.tail_path)
            tail += (TAIL_RECORD, msgpack.packb(phase), msgpack.packb(part), whole)
        self._write_vector(1, tail)

    def _write_vector(self, which: int, pieces: list[bytes]) -> None:
        """The pieces, whole: a write cut short (a full disk) goes on from where it stopped or raises."""
        for start in range(0, len(pieces), IOV_MAX):
            if self._fds is None:
                return
            chunk = pieces[start : start + IOV_MAX]
            done = os.writev(self._fds[which], chunk)
            if done < sum(map(len, chunk)):
                rest = memoryview(b"".join(chunk))[done:]
                while rest:
                    rest = rest[os.write(self._fds[which], rest) :]

    def group_accounts(self) -> Iterator[tuple[str, GroupAccount]]:
        """Every report's group accounts of the run so far, in the order taken in (ShareOutcomes.restore)."""
        for record in read_journal(self.path):
            if record[0] == "report":
                yield from record[-1].groups.items()

    def written(self, part: int) -> None:
        """Parquet part `part` is written, and every part before it: their tails go (on the writer's
        thread: it only removes files the loop no longer writes to)."""
        for path in tail_files(self.folder):
            if (numbered := TAIL_PART.fullmatch(path.name)) and int(numbered[1]) <= part:
                path.unlink(missing_ok=True)

    def lost(self, clients: list[str], stopped_by: float, worker: int, groups: dict[str, str]) -> None:
        self._write(0, ["lost", clients, stopped_by, worker, groups])

    def remove(self) -> None:
        """The run recorded its end: the journal has nothing left to tell."""
        self.close()
        self.path.unlink(missing_ok=True)
        for path in tail_files(self.folder):
            path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._fds is not None:
            for fd in self._fds:
                os.close(fd)
            self._fds = None


def read_journal(path: Path) -> Iterator[list[Any]]:
    """A journal file's records in order, its reports as IntervalReports. A record cut short by the
    crash (the last one) ends the stream; a journal of another protocol is a ValueError. msgpack finds
    where each record ends (without building it), msgspec reads it (its maps may have tuple keys)."""
    with path.open("rb") as journal:
        if not os.fstat(journal.fileno()).st_size:
            return
        with mmap.mmap(journal.fileno(), 0, access=mmap.ACCESS_READ) as whole:
            bounds = msgpack.Unpacker(whole, max_buffer_size=64 * 2**20)  # over the same mapped bytes
            start = 0
            while True:
                try:
                    bounds.skip()
                except msgpack.OutOfData:
                    return
                end = bounds.tell()
                record = msgspec.msgpack.decode(whole[start:end])
                start = end
                if record and record[0] == "report":
                    record[-1] = from_wire(IntervalReport, record[-1])
                elif record and record[0] == "start" and (protocol := record[1].get("protocol")) != PROTOCOL_VERSION:
                    written_in = protocol or "before 14"
                    raise ValueError(
                        f"its reports are in protocol {written_in}, this dimster reads {PROTOCOL_VERSION}: "
                        "summarize it with the dimster that ran it"
                    )
                yield record
