"""scripts/bench/worker_memory.py simulates a long share-group run on a worker's consumers: what a
consumer keeps between its reports must not grow with the run, and each report must account for
every record it took."""

import pytest

from dimster.worker.clients import redeliveries
from dimster.worker.protocol import decode
from tests.bench import bench_script

pytestmark = pytest.mark.unit

worker_memory = bench_script("worker_memory")


def held(client) -> tuple[int, int, int, int]:
    """What a consumer keeps from one report to the next, per record or per event."""
    watch = client.crash_watch
    return len(client.unsettled), len(watch.watches), len(client.last_seen), len(watch.redelivered)


def test_a_share_consumer_keeps_nothing_per_record_between_reports_and_each_report_counts_its_records(monkeypatch):
    """Two consumers, 2,000 records/s in polls of 100, 5 % rejected and 5 % released on delivery 1
    (received again on delivery 2 the next second): after 20 simulated seconds and after 40 a consumer
    holds the same (no record waits for an answer; the redeliveries it remembers, for a crash it may
    hear of late, are capped: at 500 here), and the reports' counts add up to the records polled."""
    monkeypatch.setattr(redeliveries, "RECENT_REDELIVERIES", 500)
    run = worker_memory.Simulation(consumers=2, rate=2000, poll=100, reject=0.05, release=0.05)
    reports = [decode(run.second()).report for _ in range(20)]
    early = [held(c) for c in run.clients]
    reports += [decode(run.second()).report for _ in range(20)]
    assert [held(c) for c in run.clients] == early == [(0, 0, 0, 500)] * 2
    clients = [c for r in reports for c in r.clients]
    received = sum(c.received for c in clients)
    assert received == run.received and 40 * 2000 < received < 40 * 2000 * 1.08
    outcomes = sum(c.accepted + c.released + c.rejected for c in clients)
    assert outcomes == received
    released = sum(c.released for c in clients)
    again = sum(c.delivery_counts.get(2, 0) for c in clients)
    assert again == released - sum(len(a) for a in run.again)  # the last second's come back after the run
