"""The console line tells one instant: sent, acked and received cut at the last time every live
worker has reported, so consumers on one worker never show ahead of producers on another."""

import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.control.console import LIVE_WITHIN, OneInstant
from dimster.worker.protocol import ClientInterval, IntervalReport, worker_report

pytestmark = pytest.mark.unit

START, RATE = 100.0, 1000  # load start; records a second the producer sends and the consumer receives


def producer(end: float, sent: int) -> IntervalReport:
    interval = ClientInterval("p0", "producer", "t", sent=sent, acked=sent, next_sequence=0)
    return worker_report(0, end, [interval])


def consumer(end: float, received: int) -> IntervalReport:
    return worker_report(1, end, [ClientInterval("c0", "share_consumer", "t", group="g", received=received)])


def sent_by(t: float) -> int:
    return round(RATE * (t - START))


def test_every_line_cuts_both_workers_at_one_instant():
    """A producer on worker 0 reports at .5 s, a consumer on worker 1 at whole seconds and has received
    all that was sent up to its report: every line shows received <= sent, both as of the cut."""
    aggregate = RunAggregate({"g": "t"})
    aggregate.load_started = START
    reports = [producer(START + k - 0.5, sent_by(START + k - 0.5) - sent_by(START + k - 1.5)) for k in range(2, 12)]
    reports += [consumer(START + k, RATE) for k in range(1, 11)]
    reports.append(producer(START + 0.5, sent_by(START + 0.5)))
    latest: dict[int, float] = {}
    lines = 0
    for r in sorted(reports, key=lambda r: r.end_time):
        aggregate.add(r)
        latest[r.lines[0].worker_index] = r.end_time
        line = aggregate.take_window()
        if len(latest) < 2:
            continue
        cut = min(latest.values())
        assert line["received"] <= line["sent"]
        assert line["sent"] == line["acked"] == sent_by(cut) == line["received"]
        lines += 1
    assert lines == 20
    assert aggregate.sent == aggregate.acked == sent_by(START + 10.5) and aggregate.received == 10 * RATE  # totals


def test_summing_latest_reports_would_show_consumers_ahead():
    """What the line showed before: each worker's latest report, summed, has received above sent."""
    aggregate = RunAggregate({"g": "t"})
    aggregate.load_started = START
    aggregate.add(producer(START + 0.5, 500))
    aggregate.add(consumer(START + 1.0, 1000))
    aggregate.add(producer(START + 1.5, 1000))
    aggregate.add(consumer(START + 2.0, 1000))
    assert aggregate.received > aggregate.sent  # the totals, each as of its worker's latest report
    line = aggregate.take_window()
    assert line["sent"] == line["received"] == 1500  # both as of 101.5, the producer's latest report


def test_a_silent_worker_stops_holding_the_cut_back():
    instant = OneInstant()
    instant.note(0, 10.0, (5,))
    instant.note(1, 10.0, (7,))
    instant.note(1, 12.0, (3,))
    assert instant.cut() == 10.0 and instant.counts(10.0, 1) == [12]
    instant.note(1, 10.0 + LIVE_WITHIN + 1, (4,))  # worker 0 not heard of since 10.0: lost
    assert instant.cut() == 10.0 + LIVE_WITHIN + 1
    assert instant.counts(instant.cut(), 1) == [5 + 7 + 3 + 4]


def test_a_workers_first_report_counts_from_when_it_began_covering():
    instant = OneInstant()
    instant.note(0, 10.0, (5,))
    instant.note(0, 11.0, (5,))
    instant.note(1, 10.5, (8,), since=9.5)  # its first report covers from 9.5 (load start)
    assert instant.counts(10.0, 1) == [5 + 4]  # worker 1 half way through its first report
    assert instant.cut() == 10.5 and instant.counts(10.5, 1) == [8 + 8]  # 5 + 2.5, then 8
