"""The Spark summary's figures of the workers themselves, on real PySpark: CPU per MB of single-role
workers over the measured phase, none for a worker of both roles or a run stopped in its warm-up, and
a note for a worker whose threads waited to run."""

import json

import pandas as pd
import pytest

from dimster.metrics.histogram import Histogram
from dimster.pipeline.summary import summarize
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ClientInterval, WakeLag, worker_report
from tests.synthetic import START


@pytest.mark.spark
def test_worker_cpu_per_mb_counts_the_measured_phase_of_single_role_workers(tmp_path, spark):
    """Worker 0 hosts a producer (1 MB/s, 0.25 CPU s/s), worker 1 a consumer (2 MB/s, 0.8 CPU s/s);
    their start-up (5 CPU seconds in the first warm-up report) is not the load's cost."""
    writer = MetricsWriter(tmp_path / "metrics", START)
    for second in range(1, 11):
        phase = "warmup" if second <= 2 else "measure"
        producer = ClientInterval(client_id="p0", role="producer", topic="t", sent=1000, sent_bytes=1_000_000)
        consumer = ClientInterval(client_id="c0", role="consumer", topic="t", group="g", received_bytes=2_000_000)
        startup = 5.0 if second == 1 else 0.0
        rss = 900_000_000 if second == 1 else 100_000_000 + second * 1_000_000  # worker 0 grows to 110 MB
        writer.add(worker_report(0, START + second, [producer], 0.25 + startup, rss, 20 + second), phase)
        writer.add(worker_report(1, START + second, [consumer], 0.8 + startup, 200_000_000, 30), phase)
    writer.flush()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "status": "completed", "load_started": START}))
    cpu = summarize(tmp_path, spark)["worker_cpu"]
    assert cpu["producer_cpu_seconds_per_mb"] == pytest.approx(0.25)
    assert cpu["consumer_cpu_seconds_per_mb"] == pytest.approx(0.4)
    assert cpu["cores"] == pytest.approx(1.05)
    # each worker's largest memory and threads in the measured phase (not the warm-up's 900 MB), summed
    assert cpu["memory_mb"] == pytest.approx(110 + 200) and cpu["threads"] == 30 + 30
    table = pd.read_csv(tmp_path / "summary" / "worker_cpu.csv")
    assert table.roles.tolist() == ["producer", "consumer"] and table.seconds.tolist() == [8.0, 8.0]
    assert table.clients.tolist() == [1, 1] and table.memory_mb.tolist() == [110.0, 200.0]


@pytest.mark.spark
def test_a_worker_hosting_both_roles_gives_no_cpu_per_mb(tmp_path, spark):
    writer = MetricsWriter(tmp_path / "metrics", START)
    for second in range(1, 6):
        clients = [
            ClientInterval(client_id="p0", role="producer", topic="t", sent_bytes=1_000_000),
            ClientInterval(client_id="c0", role="share_consumer", topic="t", group="g", received_bytes=1_000_000),
        ]
        writer.add(worker_report(0, START + second, clients, cpu_seconds=0.5), "measure")
    writer.flush()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "status": "completed", "load_started": START}))
    cpu = summarize(tmp_path, spark)["worker_cpu"]
    assert cpu["cores"] == pytest.approx(0.5)
    assert cpu["producer_cpu_seconds_per_mb"] is None and cpu["consumer_cpu_seconds_per_mb"] is None


@pytest.mark.spark
def test_a_worker_whose_threads_waited_to_run_in_the_measured_phase_gets_a_note(tmp_path, spark):
    """Worker 0's probe waited 200 ms to run in each second of the measured phase; worker 1's 20 ms,
    and 900 ms in warm-up only (its start-up): only worker 0 is noted, and the measured phase is one
    with a saturated load generator (pipeline/generator.py), its whole time, by worker 0. Worker 1's
    producer handed its records over 300 ms late in warm-up, `second` ms late after: each phase's
    worst report's publish-delay p99 is that phase's largest lateness (within the buckets' 1 %)."""
    writer = MetricsWriter(tmp_path / "metrics", START)
    for second in range(1, 11):
        phase = "warmup" if second <= 2 else "measure"
        consumer = ClientInterval(client_id="c0", role="share_consumer", topic="t", group="g", received=100)
        late = Histogram()
        late.record_many([300_000.0 if phase == "warmup" else 1_000.0 * second] * 100)
        producer = ClientInterval(client_id="p0", role="producer", topic="t", sent=100)
        delays = HistogramColumns.gather([{("publish_delay", 0): late.to_wire()}])
        busy = WakeLag(wakes=80, lag_ms_sum=200.0, lag_ms_max=40.0 + second)
        starting = WakeLag(
            wakes=10 if phase == "warmup" else 98, lag_ms_sum=900.0 if phase == "warmup" else 20.0, lag_ms_max=12.0
        )
        writer.add(worker_report(0, START + second, [consumer], 0.9, wake_lag=busy), phase)
        writer.add(worker_report(1, START + second, [producer], 0.1, wake_lag=starting, histograms=delays), phase)
    writer.flush()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "status": "completed", "load_started": START}))
    summary = summarize(tmp_path, spark)
    table = pd.read_csv(tmp_path / "summary" / "worker_cpu.csv")
    assert table.wake_wait_share.tolist() == [pytest.approx(0.2), pytest.approx(0.02)]
    assert table.wake_lag_ms_mean.tolist() == [pytest.approx(2.5), pytest.approx(20 / 98)]
    assert table.wake_lag_ms_max.tolist() == [50.0, 12.0]
    assert summary["worker_cpu"]["wake_wait_share"] == pytest.approx(0.2)
    late = [note for note in summary["notes"] if "waited to run" in note]
    assert len(late) == 1 and late[0].startswith("worker 0: its threads waited to run 20% of the measured phase")
    assert "50 ms at most" in late[0] and "1 client(s)" in late[0]
    measured, warmup = summary["generator"]["measure"], summary["generator"]["warmup"]
    assert (measured["seconds"], measured["saturated_seconds"], measured["saturated"]) == (8.0, 8.0, True)
    workers = measured["workers"]
    assert workers["0"]["wait_share"] == pytest.approx(0.2) and workers["1"]["saturated_seconds"] == 0
    assert warmup["workers"]["1"]["wait_share_max"] == pytest.approx(0.9) and warmup["saturated"]
    assert workers["1"]["publish_delay_p99_ms_max"] == pytest.approx(10.0, rel=0.01)
    assert warmup["workers"]["1"]["publish_delay_p99_ms_max"] == pytest.approx(300.0, rel=0.01)
    assert workers["0"]["publish_delay_p99_ms_max"] is None  # no producer
    [told] = [n for n in summary["notes"] if "load generator" in n]
    assert told.startswith("the load generator was saturated for 100% of the measured phase")
    # the run's own judgement, window by window (run.json's `generator`), is the phase's: one verdict
    live = {"measure": {"seconds": 8.0, "saturated_seconds": 0.5, "saturated": False, "workers": {}}}
    info = {"run_id": "r", "status": "completed", "load_started": START, "generator": live}
    (tmp_path / "run.json").write_text(json.dumps(info))
    measured = summarize(tmp_path, spark)["generator"]["measure"]
    assert (measured["seconds"], measured["saturated_seconds"], measured["saturated"]) == (8.0, 0.5, False)
    assert measured["workers"]["0"]["saturated_seconds"] == 8.0  # each worker's reports, judged one by one


@pytest.mark.spark
def test_a_run_stopped_in_its_warm_up_has_no_cpu_figures_and_still_a_summary(tmp_path, spark):
    writer = MetricsWriter(tmp_path / "metrics", START)
    for second in range(1, 4):
        producer = ClientInterval(client_id="p0", role="producer", topic="t", sent=10, sent_bytes=10_000)
        writer.add(worker_report(0, START + second, [producer], cpu_seconds=0.5), "warmup")
    writer.flush()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "status": "stopped", "load_started": START}))
    summary = summarize(tmp_path, spark)
    assert set(summary["worker_cpu"].values()) == {None}
    assert summary["compression"]["payload_bytes"] == 30_000 and summary["compression"]["ratio"] is None
