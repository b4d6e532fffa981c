"""scripts/bench/coordinator_scale.py drives the real run loop with in-memory workers: its reports must
be what a worker sends, byte for byte, and a run of it must close its account and yield its figures."""

import json
import subprocess
import sys
import time

import pytest

from dimster.worker.protocol import (
    Close,
    Closed,
    ProducersStopped,
    Ready,
    Reported,
    StartLoad,
    StopProducers,
    decode,
    encode,
)
from tests.bench import BENCH, bench_script
from tests.conftest import REPO

pytestmark = pytest.mark.unit

scale_workers = bench_script("scale_workers")
coordinator_scale = bench_script("coordinator_scale")


def _assignments(workers: int, clients_per_worker: int) -> tuple:
    from dimster.coordinator.workers.topology import build_topology, clients_by_worker, place
    from dimster.worker.protocol import Assignment
    from dimster.workload.model import Workload

    workload = Workload.model_validate(coordinator_scale.workload_of(workers, clients_per_worker, 1))
    topology = build_topology(workload, "t")
    placement = place(topology, workers)
    clients = clients_by_worker(topology, placement, workers)
    return topology, [Assignment(i, "b", {}, *mine, 4, 5, "", "4.3.1") for i, mine in enumerate(clients)]


def test_a_report_under_load_is_what_encode_makes_of_it_and_consumers_settle_their_producers():
    _, assignments = _assignments(2, 4)
    fleet = scale_workers.FakeFleet(rate=10, per_agent=1)
    fleet.place(assignments)
    bytes_by_second = [[fleet.report([i], 1.0 + k) for i in (0, 1)] for k in range(3)]
    for second in bytes_by_second:
        for data in second:
            assert encode(decode(data)) == data  # the wire as to_wire makes it: defaults left out, same order
    producing, consuming = (decode(data).report for data in bytes_by_second[2])
    producers, consumers = producing.clients, consuming.clients
    assert [c.next_sequence for c in producers] == [30, 30, 30, 30] and {c.sent for c in producers} == {10}
    assert [c.received for c in consumers] == [10] * 4 and producing.groups == {}
    [(group, account)] = consuming.groups.items()  # the consumers' ranges merged, as a worker merges them
    assert account.settled == {j: [(10, 19)] for j in range(4)}  # producer j's previous second
    assert account.received == 40
    assert account.duplicates == 0 and group == consumers[0].group
    assert fleet.pending() == {group: 40}  # each producer's last second, settled at the next report
    fleet.stop_producers(0)
    last = decode(fleet.report([1], 4.0)).report
    assert {g: a.settled for g, a in last.groups.items()} == {group: {j: [(20, 29)] for j in range(4)}}
    assert fleet.pending() == {group: 0}


def test_the_agents_process_reports_each_second_and_its_last_at_close_and_ends():
    """ScaleWorkers: Ready once the agents' process has placed the workers; the reports come from it
    through its pipe, each agent's every second from StartLoad on; stopped producers, a worker's last
    report and Closed in order; the groups' pending records told; the process ends at close()."""
    topology, assignments = _assignments(2, 4)
    fake = scale_workers.ScaleWorkers(rate=10)
    fake.start(assignments)
    try:
        ready: list = []
        started = time.time()
        while len(ready) < 2 and time.time() - started < 60:  # a fresh interpreter's start, on a busy host
            ready += fake.receive(1.0)
        assert [(i, type(m)) for i, m in ready] == [(0, Ready), (1, Ready)]
        began = time.time()
        for index in (0, 1):
            fake.send(index, StartLoad(began - 0.5))  # worker 0's first report due at once, worker 1's 0.5 s on
        # each agent's first two reports: a process late for a CPU sends what fell due meanwhile at
        # once, a worker's next report maybe before the other's first, and maybe a fifth one too
        reports: dict[int, list] = {0: [], 1: []}
        while min(map(len, reports.values())) < 2 and time.time() - began < 120:
            for i, m in fake.receive(1.0):
                if isinstance(m, Reported):
                    reports[i].append(m.report)
        firsts = sorted((r.lines[0].end_time - began, i) for i, mine in reports.items() for r in mine[:2])
        assert [i for _, i in firsts] == [0, 1, 0, 1]
        assert [end for end, _ in firsts] == pytest.approx([0.5, 1.0, 1.5, 2.0], abs=1e-6)
        for index in (0, 1):
            fake.send(index, StopProducers())
        for index in (0, 1):
            fake.send(index, Close())
        after: list = []
        closing = time.time()
        while len([m for _, m in after if isinstance(m, Closed)]) < 2 and time.time() - closing < 120:
            after += fake.receive(1.0)
        kinds = [type(m).__name__ for _, m in after]
        assert kinds.count("ProducersStopped") == 2 and kinds[-1] == "Closed"
        for index in (0, 1):
            mine = [type(m).__name__ for i, m in after if i == index and not isinstance(m, ProducersStopped)]
            assert mine[-2:] == ["Reported", "Closed"]  # its last report, then Closed
        assert fake.pending == {g: range(0) for g in topology.groups}
        process = fake.agents_process
        assert process is not None and process.is_alive()
    finally:
        fake.close()
    assert process.exitcode == 0 and fake.receive(0) == []


@pytest.mark.parametrize("per_agent", [1, 16])
def test_a_run_of_256_workers_closes_its_account_and_takes_in_every_report_sent(tmp_path, per_agent):
    """The benchmark's small version in the suite (issue 48): no speed asserted, but every report the
    fake workers (or their agents, 16 of 16 workers each, merging) sent under load was taken in, and
    the account closes."""
    out = tmp_path / "scale.json"
    command = [sys.executable, f"{BENCH}/coordinator_scale.py", "--workers", "256", "--clients-per-worker", "4"]
    command += ["--workers-per-agent", str(per_agent), "--seconds", "3", "--rss-every", "1"]
    run = subprocess.run([*command, "--json-out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    [row] = json.loads(out.read_text())
    totals = row["totals"]
    assert row["status"] == "completed" and row["workers"] == 256 and row["clients"] == 1024
    assert totals["lost"] == 0 and totals["unconsumed"] == 0
    assert totals["received"] == totals["acked"] == totals["sent"] > 0
    assert row["reports"] >= 256 // per_agent and 0 < row["share_of_one_core"] < 2 and row["us_per_report"] > 0
    assert row["worker_lines"] == per_agent * row["reports"]  # each agent's report carries all its workers
    assert row["workers_closed"] == 256  # each told what it made
    assert row["worker_lines_taken"] == row["worker_lines_made"] >= row["worker_lines"] + 256  # and each last one
    curve = row["rss_mb_curve"]  # every second of the run (--rss-every 1), each at most the peak
    assert len(curve) >= 3 and [t for t, _ in curve] == sorted(t for t, _ in curve)
    assert all(0 < mb <= row["peak_rss_mb"] + 1 for _, mb in curve)
    assert row["fake_cpu_seconds"] < row["as_measured"]["cpu_seconds"]
    assert row["report_lag_ms"]["count"] >= row["reports"] and row["report_lag_ms"]["p50"] is not None
    assert row["console_lag_ms"]["count"] == row["console_lines"] >= 2
    published = row["status_publish_ms"]  # the status, every 0.25 s: masked and encoded
    assert published["count"] >= 4 and 0 < published["p50"] <= published["max"]
    assert "256 workers (1,024 clients)" in run.stdout
