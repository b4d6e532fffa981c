"""A coordinator killed mid-run (issue 34, item 1): its journal holds every report it took, and
`dimster summarize` records the run's end from it. In-memory workers and cluster; the kill -9 of a
real run is in test_crash_recovery.py."""

import io
import json
import os
import subprocess
import sys

import msgpack
import pyarrow.parquet as pq
import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.journal import JOURNAL, RunJournal, read_journal, tail_files
from dimster.coordinator.loop.recover import crashed_account, received_past_commit, recover_crashed, replay
from dimster.errors import DimsterError
from dimster.kafka.distribution import KafkaDistribution
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import (
    PROTOCOL_VERSION,
    ClientInterval,
    IntervalReport,
    Reported,
    decode,
    encode,
    report_bytes,
    worker_report,
)
from tests.fake_run import FakeWorkers, coordinator

pytestmark = pytest.mark.unit


class Killed(BaseException):
    """Ends the coordinator as a kill would: no handler of `Exception` records its end."""


class KilledWorkers(FakeWorkers):
    def __init__(self, at_step: int):
        super().__init__(steps_needed=at_step)  # the load's duration cannot end the run first
        self.at_step = at_step

    def receive(self, timeout: float, doorbell: int | None = None):
        received = super().receive(timeout)
        if self.steps == self.at_step:
            raise Killed
        return received


def killed_run(tmp_path, at_step: int = 40):
    c = coordinator(tmp_path, KilledWorkers(at_step), durationSeconds=30)
    with pytest.raises(Killed):
        c.run()
    return c


def test_the_journal_replays_to_the_aggregate_the_coordinator_had(tmp_path):
    c = killed_run(tmp_path)
    path = c.bundle.path / JOURNAL
    info = json.loads((c.bundle.path / "run.json").read_text())
    assert info["status"] == "running"  # nothing recorded its end
    r = replay(path)
    a, live = r.aggregate, c.aggregate
    assert a.sent == live.sent > 0 and a.acked == live.acked and a.received == live.received > 0
    assert dict(a.settled_by_group) == dict(live.settled_by_group) and a.duplicates == live.duplicates
    assert r.load_started == c.load_started and set(r.groups) == set(c.topology.groups)
    assert r.topics == dict.fromkeys(c.topology.topics, c.workload.partitions_per_topic)
    # every worker is lost at its last report: its producers' last sends are not lost, and what its
    # consumers' group had not settled by their last report may be theirs, unreported: in doubt
    assert a.lost_producers == {p.producer_id for p in c.topology.producers}
    assert {tail.group for tail in a.tails.open} == set(a.groups)
    assert all(a.doubt(group) >= n for group, n in a.backlog_by_group().items())


def test_a_record_cut_short_ends_the_journal(tmp_path):
    journal = RunJournal(tmp_path)
    journal.load(100.0)
    for second in range(3):
        report = worker_report(0, 101.0 + second, [ClientInterval("p0", "producer", "t", sent=10)])
        journal.report(report, "measure", 0)
    journal.close()
    for path in (journal.path, journal.tail_path):
        path.write_bytes(path.read_bytes()[:-7])  # the crash came mid-write
    records = list(read_journal(journal.path))
    assert [r[0] for r in records] == ["load", "report", "report"]
    assert [r[-1].end_time for r in records[1:]] == [101.0, 102.0]
    assert [(r[1], r[2], r[3].clients[0].sent) for r in read_journal(journal.tail_path)] == [
        ("measure", 0, 10),
        ("measure", 0, 10),
    ]


@pytest.mark.parametrize("as_received", [False, True], ids=["encoded again", "as received"])
def test_the_account_journal_keeps_counts_and_ranges_and_the_tail_the_whole_report(tmp_path, as_received):
    """A report that came as bytes goes to the tail as it came: the same records as encoding it again.
    The account keeps a client's details that count (failed sends, a crash's held records), not the rest."""
    consumer = ClientInterval(
        "c0", "share_consumer", "t", "g", received=5, accepted=4, rejected=1, settled={0: [(0, 4)]},
        settled_rejected={(0, 1): [(4, 4)]}, delivery_counts={1: 5}, client_stats={"x": 1.0},
        rebalances=[(100.5, "assigned", 3)], crash_held={0: [(2, 3)]}, crashed_at=100.9,
    )  # fmt: skip
    producer = ClientInterval("p0", "producer", "t", sent=9, failed_sequences=[7, 8], client_stats={"y": 2.0})
    idle = [ClientInterval(f"p{i}", "producer", "t") for i in range(1, 20)]  # 21 clients: longer arrays
    journal = RunJournal(tmp_path)
    latencies = HistogramColumns.gather([{("e2e", 0): ({10: 5}, 50, 1.0, 2.0)}])
    report = worker_report(0, 101.0, [consumer, producer, *idle], histograms=latencies)
    message = decode(encode(Reported(report))) if as_received else Reported(report)
    assert isinstance(message, Reported) and (report_bytes(message.received) is not None) == as_received
    journal.report(message.report, "measure", 0, message.received)
    [(_, account)] = read_journal(journal.path)
    [(_, _, _, whole)] = read_journal(journal.tail_path)
    assert account.groups["g"].settled == {0: [(0, 4)]} and account.clients[0].received == 5
    assert account.groups["g"].settled_rejected == {(0, 1): [(4, 4)]}  # a map with tuple keys (protocol 17)
    assert len(account.histograms) == 0 and account.clients[0].client_stats is None
    assert account.clients[0].delivery_counts == {} and account.clients[0].rebalances == []
    assert account.clients[0].crash_held == {0: [(2, 3)]} and account.clients[1].failed_sequences == [7, 8]
    assert account.clients[1].client_stats is None and len(account.clients) == 21
    assert whole.clients == report.clients and whole.groups == report.groups and whole.histograms == latencies
    journal.written(0)  # the Parquet files hold the tail now
    assert tail_files(tmp_path) == [] and journal.path.stat().st_size > 0


def test_each_parquet_part_has_a_tail_of_its_own_removed_once_the_part_is_written(tmp_path):
    """The parts are written behind the loop: reports of the next part arrive while one is written."""
    journal = RunJournal(tmp_path)
    for part in (0, 0, 1, 2):
        journal.report(worker_report(0, 101.0, [ClientInterval("p0", "producer", "t", sent=part)]), "measure", part)
    assert [p.name for p in tail_files(tmp_path)] == [f"journal-tail-0000{n}.msgpack" for n in (0, 1, 2)]
    journal.written(1)
    [left] = tail_files(tmp_path)
    assert [(r[2], r[3].clients[0].sent) for r in read_journal(left)] == [(2, 2)]
    journal.report(worker_report(0, 102.0, [ClientInterval("p0", "producer", "t", sent=9)]), "measure", 2)
    assert [r[3].clients[0].sent for r in read_journal(left)] == [2, 9]
    journal.remove()
    assert tail_files(tmp_path) == [] and not journal.path.exists()


def test_a_pass_of_reports_is_journaled_in_order_each_tail_to_its_parts_file(tmp_path, monkeypatch):
    """A pass's reports go by one writev a file (a part's tail switched within it: one more), in order."""
    writes: list[int] = []
    writev = os.writev
    monkeypatch.setattr(os, "writev", lambda fd, pieces: writes.append(fd) or writev(fd, pieces))
    journal = RunJournal(tmp_path)
    sent = [("measure", 0, 1), ("measure", 0, 2), ("measure", 1, 3), ("measure", 1, 4), (None, 0, 5)]

    def report(n: int) -> IntervalReport:  # n records sent, at 101 + n s
        return worker_report(0, 101.0 + n, [ClientInterval("p0", "producer", "t", sent=n)])

    journal.reports([(report(n), phase, part, b"") for phase, part, n in sent])
    assert len(writes) == 3  # part 0's tail, part 1's tail, the account
    assert [r[-1].clients[0].sent for r in read_journal(journal.path)] == [1, 2, 3, 4, 5]
    assert [[r[3].clients[0].sent for r in read_journal(path)] for path in tail_files(tmp_path)] == [[1, 2], [3, 4]]


def test_a_write_cut_short_goes_on_and_a_crash_between_the_files_leaves_the_account_whole(tmp_path, monkeypatch):
    """A writev that writes part of its pieces (a full disk) is finished by the journal itself; the
    account is written before the tail, so a crash between them loses metrics rows, never counts."""
    writev, calls = os.writev, []

    def short_then_crash(fd, pieces):
        calls.append(fd)
        if len(calls) == 2:  # the tail's: the coordinator is killed before it
            raise Killed
        return writev(fd, [bytes(pieces[0])[:5]])  # 5 bytes of the first piece

    monkeypatch.setattr(os, "writev", short_then_crash)
    journal = RunJournal(tmp_path)
    reports = [worker_report(0, 101.0 + n, [ClientInterval("p0", "producer", "t", sent=n)]) for n in (1, 2)]
    with pytest.raises(Killed):
        journal.reports([(report, "measure", 0, b"") for report in reports])
    assert [r[-1].clients[0].sent for r in read_journal(journal.path)] == [1, 2]
    assert list(read_journal(journal.tail_path)) == []


def test_summarize_records_a_crashed_run_from_its_journal(tmp_path):
    c = killed_run(tmp_path)
    run_dir = c.bundle.path
    flushed = sum(pq.read_metadata(p).num_rows for p in (run_dir / "metrics" / "intervals").glob("*.parquet"))
    tail = [record for path in tail_files(run_dir) for record in read_journal(path)]
    unwritten_rows = sum(len(record[3].clients) for record in tail)
    info = json.loads((run_dir / "run.json").read_text())
    with pytest.raises(DimsterError, match="still running"):  # its coordinator (this process) lives
        recover_crashed(run_dir)
    gone = subprocess.Popen(["true"])
    gone.wait()
    info["coordinator_process"] = {"pid": gone.pid, "started": 0.0}
    (run_dir / "run.json").write_text(json.dumps(info))
    notes = recover_crashed(run_dir)
    assert notes[0].startswith("the run crashed: its end is recorded from its journal")
    assert any("positions are unknown" in n for n in notes)  # its environment names no cluster here
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "crashed" and info["recovered_from"] == "journal"
    totals = info["totals"]
    assert totals["sent"] == c.aggregate.sent and totals["acked"] == totals["acked_reported"] == c.aggregate.acked
    assert totals["unconsumed"] is None and all(not g["closes"] for g in info["account"].values())
    rows = sum(pq.read_metadata(p).num_rows for p in (run_dir / "metrics" / "intervals").glob("*.parquet"))
    assert unwritten_rows > 0 and rows == flushed + unwritten_rows  # each report once in the metrics
    assert not (run_dir / JOURNAL).exists() and not tail_files(run_dir)
    assert recover_crashed(run_dir) == []  # recorded once


def test_a_journal_of_another_protocol_is_one_line_naming_both(tmp_path):
    c = killed_run(tmp_path)
    run_dir = c.bundle.path
    info = json.loads((run_dir / "run.json").read_text())
    gone = subprocess.Popen(["true"])
    gone.wait()
    info["coordinator_process"] = {"pid": gone.pid, "started": 0.0}
    (run_dir / "run.json").write_text(json.dumps(info))
    records = list(msgpack.Unpacker(io.BytesIO((run_dir / JOURNAL).read_bytes()), strict_map_key=False))
    assert records[0][0] == "start" and records[0][1]["protocol"] == PROTOCOL_VERSION
    del records[0][1]["protocol"]  # as a dimster before protocol 14 wrote it
    (run_dir / JOURNAL).write_bytes(b"".join(msgpack.packb(r) for r in records))
    with pytest.raises(DimsterError, match=f"in protocol before 14, this dimster reads {PROTOCOL_VERSION}"):
        recover_crashed(run_dir)


def test_a_run_that_records_its_end_leaves_no_journal(tmp_path):
    c = coordinator(tmp_path, FakeWorkers())
    assert c.run() == 0
    assert not (c.bundle.path / JOURNAL).exists() and not tail_files(c.bundle.path)


def account_of(acked_reported: int, in_log: int | None, settled: int, unconsumed: int | None) -> dict:
    a = RunAggregate({"g": "t"})
    a.acked_by_topic["t"], a.settled_by_group["g"] = acked_reported, settled
    logs, positions = None if in_log is None else {"t": in_log}, None if unconsumed is None else {"g": unconsumed}
    return crashed_account(a, logs, positions)["g"]


def test_a_crashed_account_counts_acked_from_the_log_and_its_unreported_tail_in_doubt():
    # 10 records reached the log after the producers' last report; 3 were settled unreported
    g = account_of(100, 110, settled=95, unconsumed=12)
    assert (g["acked"], g["accepted"], g["unconsumed"], g["in_doubt"], g["lost"]) == (110, 95, 12, 3, 0)
    assert g["closes"] and g["unaccounted"] == 0
    # however many the broker counts consumed past the last report the coordinator took: in doubt (a busy
    # host's coordinator trails its workers' reports by seconds; a bound of one second's receive rate
    # called 112 records of a share group lost that its consumers had acknowledged)
    g = account_of(100, 110, settled=80, unconsumed=12)
    assert (g["in_doubt"], g["lost"], g["closes"]) == (18, 0, True)
    # a record both settled and within the group's reach: the account does not close, by that record
    g = account_of(100, 110, settled=100, unconsumed=11)
    assert (g["in_doubt"], g["lost"], g["closes"], g["unaccounted"]) == (0, 0, False, -1)
    # the cluster unknown: acked as reported, the account open
    g = account_of(100, None, settled=95, unconsumed=None)
    assert (g["acked"], g["unconsumed"], g["lost"], g["closes"]) == (100, None, None, False)


def test_records_past_a_consumer_group_s_commit_count_once_as_received():
    a = RunAggregate({"g": "t", "h": "t"})
    a.settled[("g", 1)].add(0, 9)  # producer 1's sequences 0-9 reported received by g
    a.settled[("g", 2)].add(5, 5)
    past_commit = [(1, 8), (1, 9), (1, 10), (2, 5), (2, 6), (3, 0)]  # as read from the log
    assert received_past_commit(a, "g", past_commit) == 3  # (1, 8), (1, 9), (2, 5)
    assert received_past_commit(a, "h", past_commit) == 0  # another group's reports count nothing
    assert ("h", 1) not in a.settled  # reading adds no empty entries


def test_a_journal_that_is_not_one_is_one_error_line(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"status": "crashed"}))
    (run_dir / JOURNAL).write_bytes(b"\x92\xa6report\x01")  # a report that is no report
    with pytest.raises(DimsterError, match=r"journal\.msgpack cannot be read"):
        recover_crashed(run_dir)


def test_a_coordinator_that_dies_of_a_fatal_signal_leaves_its_threads_stacks_and_one_that_ends_leaves_nothing(
    tmp_path,
):
    """A C library's abort() (librdkafka's assertions abort) ends the process past any Python handler:
    the fault handler writes every thread's stack first, to the file the run's bundle keeps."""
    fatal = tmp_path / "coordinator-fatal.log"
    program = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from dimster.coordinator.loop.failures import fatal_errors_logged\n"
        "def the_loop_at_its_pass():\n"
        "    os.abort()\n"
        "with fatal_errors_logged(Path(sys.argv[1])):\n"
        "    the_loop_at_its_pass()\n"
    )
    died = subprocess.run([sys.executable, "-c", program, str(fatal)], capture_output=True, text=True, timeout=60)
    assert died.returncode == -6  # SIGABRT
    written = fatal.read_text()
    assert "Fatal Python error: Aborted" in written and "the_loop_at_its_pass" in written, written
    ended = subprocess.run([sys.executable, "-c", program.replace("os.abort()", "pass"), str(fatal)], timeout=60)
    assert ended.returncode == 0 and not fatal.exists()


def test_the_fault_handler_never_stands_in_front_of_a_jvm(tmp_path, monkeypatch):
    """The JVM takes SIGSEGV for its own use: Python's fault handler in front of it turned one into a
    fatal error that killed the coordinator (a `--modify` checked Java client properties in its JVM).
    A run does not turn the handler on in a process that runs a JVM, and a JVM's start turns it off
    before the JVM installs its own handlers."""
    import faulthandler

    import jpype

    from dimster.clients import jvm
    from dimster.coordinator.loop.failures import fatal_errors_logged

    monkeypatch.setattr(jvm, "_started_version", "4.4.0")
    with fatal_errors_logged(tmp_path / "fatal.log"):
        assert not faulthandler.is_enabled()
    monkeypatch.setattr(jvm, "_started_version", None)
    with fatal_errors_logged(tmp_path / "fatal.log"):
        assert faulthandler.is_enabled()
        seen = []
        monkeypatch.setattr(jpype, "isJVMStarted", lambda: False)
        distribution = KafkaDistribution("4.4.0", tmp_path, tmp_path)
        monkeypatch.setattr(jvm, "kafka_distribution", lambda version: distribution)
        monkeypatch.setattr(jvm, "libjvm_path", lambda: "libjvm.so")
        monkeypatch.setattr(jpype, "startJVM", lambda *a, **k: seen.append(faulthandler.is_enabled()))
        jvm.start_jvm("4.4.0")
        assert seen == [False]
