"""An agent's workers' reports sent as one (protocol 20, dimster/worker/report_merge.py and
dimster/remote/report_hold.py): a line per worker, the clients after each other, the groups' ranges
united. Fed the merged reports, the coordinator counts, shows and writes what it does fed each
worker's report alone."""

import random

import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.live_thresholds import LiveJudge
from dimster.remote.report_hold import HOLD_SECONDS, ReportHold
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.accounts import GroupAccount, side_by_side
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import (
    ClientInterval,
    ProtocolError,
    Reported,
    WakeLag,
    decode,
    encode,
    worker_report,
)
from dimster.worker.report_merge import merged
from dimster.worker.wire import Ranges

pytestmark = pytest.mark.unit

START = 1_000.0
WORKERS = 3


def _histogram(rng: random.Random, low: int) -> tuple:
    buckets = {rng.randrange(low, low + 40): rng.randrange(1, 9) for _ in range(5)}
    return buckets, sum(buckets.values()), float(low), float(low + 400)


def _reports(rng: random.Random, second: int, sent: dict[int, int]) -> list:
    """Each worker's report of one second: two producers, two consumers of group g that settle random
    records of every producer (overlapping within and across workers), one of h; histograms, statistics
    and delivery counts on some."""
    end = START + second
    reports = []
    for w in range(WORKERS):
        clients, latencies = [], []
        for k in range(2):
            producer_id = 2 * w + k
            n = rng.randrange(20, 40)
            sent[producer_id] += n
            stats = {"batch_records_avg": 5.0} if rng.random() < 0.3 else None
            clients.append(
                ClientInterval(
                    f"p{producer_id}", "producer", "t", sent=n, acked=n, next_sequence=sent[producer_id],
                    target_rate=30.0, client_stats=stats,
                )
            )  # fmt: skip
            latencies.append({("publish", -1): _histogram(rng, 100), ("publish_delay", -1): _histogram(rng, 5 + w)})
        for k in range(3):
            group = "g" if k < 2 else "h"
            settled = {}
            for p in range(2 * WORKERS):
                values = {rng.randrange(max(1, sent[p])) for _ in range(rng.randrange(6))}
                if values:
                    settled[p] = Ranges(sorted((v, v) for v in values))
            received = sum(len(r) for r in settled.values())
            rejected = {(p, 1): Ranges(r[:1]) for p, r in settled.items() if rng.random() < 0.2}
            clients.append(
                ClientInterval(
                    f"c{3 * w + k}", "share_consumer", "t", group, received=received, polls=1, accepted=received,
                    settled=settled, settled_rejected=rejected, delivery_counts={1: received} if received else {},
                    first_received_at=end - 0.9, last_received_at=end - 0.1,
                )
            )  # fmt: skip
            latencies.append({("e2e", 0): _histogram(rng, 1000)} if received else {})
        lag = WakeLag(10, rng.random() * 5, 1.0)
        end_w = end + 0.01 * w  # the workers of an agent report at nearly one instant
        histograms = HistogramColumns.gather(latencies)
        reports.append(worker_report(w, end_w, clients, 0.1 * (w + 1), 10**8, 30, lag, 0.0, 2, histograms))
    return reports


def _fed(merge: str, tmp_path) -> tuple:
    """merge: "" (each report alone), "united" (as an agent sends them), "side by side" (as the loop takes
    a pass's reports in: each group's ranges not united)."""
    rng = random.Random(20)
    aggregate = RunAggregate({"g": "t", "h": "t"})
    aggregate.load_started = START
    judge = LiveJudge([("produced.rate >= 1msg/s", False), ("e2e.p99 < 10s", False)])
    writer = MetricsWriter(tmp_path / (merge or "alone"), START)
    sent = dict.fromkeys(range(2 * WORKERS), 0)
    windows = []
    for second in range(1, 13):
        reports = _reports(rng, second, sent)
        if merge == "united":
            reports = [decode(encode(Reported(merged(reports)))).report]
        elif merge:
            reports = [merged(reports, unite=False)]
        for report in reports:
            aggregate.add(report)
            judge.take(report, "measure", START)
            writer.add(report, "measure")
        if second % 4 == 0:
            loads = aggregate.window.loads()  # each worker's use of its host (diagnosis/generator.py)
            windows.append((loads, aggregate.take_window(live=range(WORKERS))))
    writer.flush()
    tables = {table: writer.folder / table for table in ("intervals", "workers", "histograms", "client_stats")}
    return aggregate, judge, windows, tables


def _rows(folder) -> list:
    import pyarrow.parquet as pq

    table = pq.read_table(folder).to_pylist()
    return sorted(table, key=repr)


@pytest.mark.parametrize("merge", ["united", "side by side"])
def test_a_merged_report_counts_shows_and_writes_what_its_workers_reports_alone_do(tmp_path, merge):
    alone, alone_judge, alone_windows, alone_tables = _fed("", tmp_path)
    merged_, merged_judge, merged_windows, merged_tables = _fed(merge, tmp_path)
    assert alone.duplicates > 0 and alone.outcomes.count("rejected", "g") > 0  # the draw has both
    for name in ("sent", "acked", "received", "accepted", "duplicates"):
        assert getattr(merged_, name) == getattr(alone, name), name
    assert merged_.settled_by_group == alone.settled_by_group
    assert {k: v.ranges() for k, v in merged_.settled.items()} == {k: v.ranges() for k, v in alone.settled.items()}
    assert merged_.account({"g": 0, "h": 0}) == alone.account({"g": 0, "h": 0})
    assert merged_.recent_rates() == pytest.approx(alone.recent_rates())
    # each consumer noted with its group after its last report (the group's settled count then may be
    # higher merged: a merged report's other workers' settled records count at once, and any is a bound)
    assert {c: g for c, (g, _) in merged_.tails.seen.items()} == {c: g for c, (g, _) in alone.tails.seen.items()}
    assert all(merged_.tails.seen[c][1] >= n for c, (_, n) in alone.tails.seen.items())
    for (loads, seen), (expected_loads, expected) in zip(merged_windows, alone_windows, strict=True):
        assert loads == expected_loads and len(loads) == WORKERS and loads[0].publish_delay_p99_ms
        assert seen.pop("generator") == expected.pop("generator")
        assert seen == expected, (seen, expected)
    assert {name: merged_judge.value(name, {}) for name in ("produced.rate", "e2e.p99")} == {
        name: alone_judge.value(name, {}) for name in ("produced.rate", "e2e.p99")
    }
    for table, folder in alone_tables.items():
        assert _rows(merged_tables[table]) == _rows(folder), table
    assert len(_rows(alone_tables["workers"])) == 12 * WORKERS  # a row a worker and second, merged or not


def test_lines_that_disagree_with_the_clients_are_protocol_errors():
    producer = ClientInterval("p0", "producer", "t", sent=1)
    report = merged([worker_report(0, 1.0, [producer]), worker_report(1, 1.0, [producer, producer])])
    assert [line.clients for line in report.lines] == [1, 2]
    assert decode(encode(Reported(report))).report.clients == [producer] * 3
    report.lines[1].clients = 1
    with pytest.raises(ProtocolError, match="lines whose clients do not add up"):
        decode(encode(Reported(report)))
    report.lines[1].clients, report.lines[1].worker_index = 2, 0
    with pytest.raises(ProtocolError, match="two lines"):
        decode(encode(Reported(report)))


def _reported(worker: int) -> Reported:
    return decode(encode(Reported(worker_report(worker, 1.0, [ClientInterval(f"p{worker}", "producer", "t")]))))


def test_an_agent_holds_its_workers_reports_until_each_has_one_then_sends_them_as_one():
    hold = ReportHold()
    workers = {0, 1, 2}
    assert hold.take(1, _reported(1), 10.0, workers) == [] and hold.take(0, _reported(0), 10.1, workers) == []
    assert hold.wait(10.1) == pytest.approx(HOLD_SECONDS - 0.1)
    [one] = hold.take(2, _reported(2), 10.2, workers)
    assert [line.worker_index for line in one.report.lines] == [0, 1, 2]  # in the workers' order
    assert [c.client_id for c in one.report.clients] == ["p0", "p1", "p2"]
    assert hold.wait(10.2) is None and hold.release() == []
    # a worker's next report while its last is held: the held ones go first, as they are
    first = _reported(0)
    assert hold.take(0, first, 11.0, workers) == []
    [alone] = hold.take(0, _reported(0), 11.5, workers)
    assert alone is first and alone.received  # one report goes as it came
    assert hold.wait(11.5 + HOLD_SECONDS) == 0  # the serve loop sends it then
    # a worker closed: the open ones are enough
    assert len(hold.take(1, _reported(1), 12.0, {0, 1})) == 1


def test_held_reports_go_at_once_when_they_grow_too_large(monkeypatch):
    import dimster.remote.report_hold as report_hold

    first, second = _reported(0), _reported(1)
    monkeypatch.setattr(report_hold, "HELD_BYTES", len(first.received) + len(second.received))
    hold = ReportHold()
    assert hold.take(0, first, 1.0, {0, 1, 2}) == []
    [both] = hold.take(1, second, 1.0, {0, 1, 2})  # worker 2 has not reported: they go anyway
    assert [line.worker_index for line in both.report.lines] == [0, 1] and hold.bytes == 0


def test_the_coordinator_takes_a_pass_s_reports_in_as_few_merged_ones_as_keep_phases_and_workers_apart(
    tmp_path, monkeypatch
):
    """ReportIntake.taken: the reports in a row before another message are taken in before it, each
    journaled; merged where they are of one phase and of different workers; and counted as alone."""
    from dimster.coordinator.account import intake
    from dimster.coordinator.account.journal import RunJournal, read_journal
    from dimster.worker.protocol import Closed

    rng = random.Random(7)
    sent = dict.fromkeys(range(2 * WORKERS), 0)
    seconds = [_reports(rng, second, sent) for second in range(1, 5)]
    merges: list[list[int]] = []

    def recorded(reports, unite=True):
        merges.append([line.worker_index for r in reports for line in r.lines])
        return merged(reports, unite)

    monkeypatch.setattr(intake, "merged", recorded)
    alone = RunAggregate({"g": "t", "h": "t"})
    taking = intake.ReportIntake(RunAggregate({"g": "t", "h": "t"}), None, None, None, RunJournal(tmp_path))  # type: ignore[arg-type]
    for a in (alone, taking.aggregate):
        a.load_started = START
    received = [(r.lines[0].worker_index, Reported(r)) for r in seconds[0]] + [(9, Closed())]
    received += [(r.lines[0].worker_index, Reported(r)) for r in [*seconds[1][:2], *seconds[2], *seconds[3]]]
    phase_of = lambda end: "warmup" if end < START + 3.5 else "measure"  # noqa: E731
    others = []
    for index, message in taking.taken(received, None, phase_of, loading=True):
        others.append((index, message, taking.aggregate.sent))
    for _, message in received:
        if isinstance(message, Reported):
            alone.add(message.report)
    first_sent = sum(int(r.clients.count("sent").sum()) for r in seconds[0])
    assert [(i, type(m), s) for i, m, s in others] == [(9, Closed, first_sent)]  # after the reports before it
    # second 3 starts again at worker 0 (two lines of a worker are never one report), second 4 in another phase
    assert merges == [[0, 1, 2], [0, 1], [0, 1, 2], [0, 1, 2]]
    for name in ("sent", "acked", "received", "accepted", "duplicates"):
        assert getattr(taking.aggregate, name) == getattr(alone, name), name
    assert taking.aggregate.settled_by_group == alone.settled_by_group
    assert len(list(read_journal(taking.journal.path))) == 3 + 2 + 3 + 3  # each report journaled


def test_accounts_side_by_side_keep_each_keys_ranges_in_the_accounts_order():
    """A key of one account keeps its ranges as they are; a key of several gets theirs one list after
    another, in the accounts' order; keys come in the order they first came."""
    first = GroupAccount(settled={1: Ranges([(0, 4)]), 2: Ranges([(0, 1)])}, settled_rejected={(1, 1): [(3, 3)]})
    second = GroupAccount(settled={3: Ranges([(5, 9)]), 1: Ranges([(2, 6)])})
    third = GroupAccount(settled={1: Ranges([(10, 10)])}, settled_rejected={(1, 1): [(4, 4)], (2, 1): [(0, 0)]})
    together = side_by_side([first, second, third], GroupAccount(received=3))
    assert list(together.settled) == [1, 2, 3]
    assert together.settled[1] == [(0, 4), (2, 6), (10, 10)] and together.settled[2] is first.settled[2]
    assert together.settled[3] is second.settled[3]
    assert together.settled_rejected == {(1, 1): [(3, 3), (4, 4)], (2, 1): [(0, 0)]}
    assert together.settled_archived == {} and together.received == 3
