"""`dimster run` end to end on the real `local` cluster: every record accounted for, metrics on disk,
pacing, the start barrier, the summary, explicit acknowledgements, and runs that end early (Ctrl-C,
a crashed worker)."""

import html
import json
import os
import signal
from pathlib import Path

import pytest
import yaml

from dimster.diagnosis.generator import WorkerLoad
from dimster.diagnosis.limits import GENERATOR
from dimster.environment import DEFAULT_KAFKA_VERSION
from dimster.worker.wake_lag import PERIOD_S
from tests.conftest import dimster
from tests.runs import events, run_info, run_until, start_run, summarized, table, wait, write_workload


def generator_signs(inputs: dict) -> list[str]:
    """The worker's own signs of saturation (diagnosis/generator.py's rules) in a load-generator limit's
    inputs (diagnosis/limits.py's generator_limit: worker{N}WaitShare, ...CpuCores, ...StealShare)."""
    cores = len(os.sched_getaffinity(0))  # the cores a worker may use (worker/process.py)
    workers = {int(key[len("worker") : -len("WaitShare")]) for key in inputs if key.endswith("WaitShare")}
    signs = []
    for w in workers:  # each share over one second is its seconds over that second
        share = {name: inputs[f"worker{w}{name}"] for name in ("WaitShare", "CpuCores", "StealShare")}
        load = WorkerLoad(w, 1.0, share["WaitShare"], share["CpuCores"], share["StealShare"] * cores, cores)
        signs += load.reasons()
    return signs


def every_record_once(bundle: Path, summary: dict, consumer_type: str) -> None:
    """What any completed run must show: every record sent, acknowledged and received once; the metrics
    on disk tell the same story as the totals and the summary; the bundle holds what it promises."""
    info = run_info(bundle)
    totals = info["totals"]
    assert totals["sent"] >= 2_000
    assert totals["acked"] == totals["sent"] == totals["received"]
    assert totals["lost"] == 0 and totals["duplicates"] == 0 and totals["backlog"] == 0
    # A group that keeps up is never diagnosed with a Kafka limit (test_limits_live.py: one that does not).
    # On a busy host dimster's own load generator may be named, and only with its worker's own signs.
    for told in (e for e in events(bundle) if e["event"] == "limit"):
        assert told["limit"] == GENERATOR, told
        assert generator_signs(told["limitInputs"]), told
    for line in (bundle / "console.log").read_text().splitlines():  # the generator, or its end
        assert "limit:" not in line or "limit: the load generator" in line or "limit: none" in line, line

    intervals = table(bundle, "intervals")
    producers = intervals[intervals.role == "producer"]
    consumers = intervals[intervals.role != "producer"]
    assert producers.sent.sum() == totals["sent"]  # the metrics tell the same story as the totals
    assert consumers.received.sum() == totals["received"]
    assert set(consumers.client_id) == {"c0", "c1", "c2"}
    # Pacing as the code controls it, not as fast as this machine sends: each of the 2 producers paced to
    # 250 msg/s in every measured interval. (The due times of that pace: tests/test_schedule.py.)
    measure = producers[producers.phase == "measure"]
    assert len(measure) > 0 and set(measure.target_rate) == {250.0}

    histograms = table(bundle, "histograms")
    # every record's latency once: in the measured phase's metric, or in warm-up's (by intended send time)
    e2e = histograms[histograms.metric.isin(["e2e", "warmup_e2e"])]
    assert e2e["count"].sum() == totals["received"]
    assert set(e2e.partition) == {0, 1, 2}
    assert histograms[histograms.metric.isin(["publish", "warmup_publish"])]["count"].sum() == totals["acked"]
    stats = table(bundle, "client_stats")
    assert (stats[stats.role == "producer"].tx_msgs.max()) > 0
    for name in ("workload.yaml", "environment.yaml", "broker-config.yaml", "events.jsonl", "logs/worker-0.log"):
        assert (bundle / name).exists(), name
    assert info["versions"]["kafka"] == DEFAULT_KAFKA_VERSION and info["versions"]["librdkafka"]
    assert info["hardware"]["cpus"] >= 1 and "run" in info["command_line"]
    assert yaml.safe_load((bundle / "workload.yaml").read_text())["consumerType"] == consumer_type

    # The barrier: every consumer held its assignment before load started, and that is recorded.
    kinds = [e["event"] for e in events(bundle)]
    assert "consumers_assigned" in kinds and kinds.index("consumers_assigned") < kinds.index("load_started")
    [(group, seconds)] = info["consumer_assignment_seconds"].items()
    assert group in info["groups"] and seconds > 0
    assert summary["consumer_assignment_seconds"] == info["consumer_assignment_seconds"]

    # The summary agrees with the run's own accounting; the measured phase's latencies cover exactly
    # the records intended in it, each consumed once.
    assert summary["status"] == "completed" and summary["totals"] == totals
    latency = summary["latency_ms"]
    assert latency["e2e"]["count"] == histograms[histograms.metric == "e2e"]["count"].sum()
    assert latency["e2e"]["count"] == latency["publish_delay"]["count"] > 0
    assert latency["e2e"]["count"] <= intervals[intervals.phase.isin(["measure", "drain"])].sent.sum()
    assert 0 < latency["e2e"]["p50"] <= latency["e2e"]["p99"]
    # each worker report carries its process's memory and threads: at least a thread per client it hosts
    workers = table(bundle, "workers")
    assert (workers.rss_bytes > 0).all() and (workers.threads >= intervals.client_id.nunique()).all()
    measured = workers[workers.phase == "measure"]
    assert summary["worker_cpu"]["memory_mb"] == pytest.approx(measured.rss_bytes.max() / 1e6)
    assert summary["worker_cpu"]["threads"] == measured.threads.max()
    # and how late its probe thread woke: at most once per period of the time the report covers
    spans = workers.sort_values("end_time").groupby("worker").end_time.diff().dropna()
    covered = workers.loc[spans.index]
    assert (covered.wakes <= spans / PERIOD_S + 2).all()
    assert (covered[spans >= 0.1].wakes > 0).all()  # a report 1 ms after the previous one may have none
    assert (workers.wake_lag_ms_sum >= workers.wake_lag_ms_max).all() and (workers.wake_lag_ms_max >= 0).all()
    report = (bundle / "report.html").read_text()
    assert "plotly" in report and bundle.name in report
    assert html.escape("workers' memory (MB, resident)") in report
    # the clients' own view of their requests (librdkafka's statistics), in ms: no record waits longer
    # in the client or for a request than its whole publish latency
    producer_stats = stats[(stats.role == "producer") & (stats.phase == "measure")]
    assert (producer_stats.queue_time_avg_ms > 0).any() and (producer_stats.request_latency_avg_ms > 0).any()
    ratios, publish_max = summary["client_stats"], latency["publish"]["max"]
    assert 0 < ratios["producer_queue_time_ms_avg"] <= publish_max
    assert 0 < ratios["producer_request_latency_ms_avg"] <= publish_max
    assert ratios["consumer_request_latency_ms_avg"] > 0


# The runs end on counts: 2,500 records at 500 msg/s after 2 s of warm-up, reports every 2 s; and not
# before 13 s of load, so that the measured phase holds a report of the clients' own statistics whose
# 5 s lie in it. They come every 5 s from the client's start, which comes before load by however long
# the consumers took to hold their assignments: any 10 s hold a whole one, and 11 s of measured phase
# leave a second for the reports' own lateness. (11 s of load failed on CI: the consumers took 3.5 s,
# the reports came at 1.8, 6.8 and 11.8 s of load, and the stop at 11.8 s came before the third.)
ONCE = {"warmupSeconds": 2, "reportIntervalSeconds": 2}
ONCE_UNTIL = "received>=2500 and elapsedSeconds>=13"


@pytest.mark.kafka
def test_a_share_group_run_accounts_for_every_record_and_summarizes_itself(tmp_path):
    """The whole path once: the run's own Spark summary and report at its end."""
    bundle = run_until(tmp_path, "once-share", ONCE_UNTIL, summary=True, consumerType="SHARE_GROUP", **ONCE)
    summary = json.loads((bundle / "summary" / "summary.json").read_text())
    every_record_once(bundle, summary, "SHARE_GROUP")


@pytest.mark.kafka
def test_a_consumer_group_run_accounts_for_every_record(tmp_path, spark):
    bundle = run_until(tmp_path, "once-group", ONCE_UNTIL, consumerType="CONSUMER_GROUP", **ONCE)
    every_record_once(bundle, summarized(bundle, spark), "CONSUMER_GROUP")


@pytest.mark.kafka
@pytest.mark.parametrize("library", ["librdkafka", "java"])
def test_explicit_release_redelivers_without_loss(tmp_path, library):
    bundle = run_until(
        tmp_path,
        f"explicit-release-{library}",
        "received>=1500",
        clientLibrary=library,
        acknowledgement={"mode": "EXPLICIT", "releaseFraction": 0.2, "rejectFraction": 0.05},
    )
    totals = run_info(bundle)["totals"]
    assert totals["released"] > 0 and totals["rejected"] > 0
    assert totals["received"] > totals["sent"]  # released records came back
    assert totals["lost"] == 0 and totals["duplicates"] == 0
    deliveries = table(bundle, "delivery_counts")
    redelivered = deliveries[deliveries.delivery_count >= 2]["count"].sum()
    assert redelivered > 0
    assert deliveries["count"].sum() == totals["received"]


@pytest.mark.kafka
def test_ctrl_c_stops_gracefully_and_keeps_everything(tmp_path):
    process, bundle = start_run(tmp_path, "interrupted", durationSeconds=0)
    wait("received>=500")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "stopping: producers stop, consumers drain" in out
    info = run_info(bundle)
    assert info["status"] == "completed"
    assert info["totals"]["lost"] == 0 and info["totals"]["sent"] == info["totals"]["received"] > 0
    events = [json.loads(line)["event"] for line in (bundle / "events.jsonl").read_text().splitlines()]
    assert events.index("stopping") < events.index("drain_started") < events.index("run_ended")


@pytest.mark.kafka
def test_crashed_worker_is_reported_and_measurements_kept(tmp_path):
    process, bundle = start_run(tmp_path, "crash", durationSeconds=0)
    [worker] = run_info(bundle)["workers"]
    os.kill(worker["pid"], signal.SIGKILL)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 4
    assert "Traceback" not in err
    [line] = [x for x in err.splitlines() if x.startswith("dimster: error:")]
    assert f"worker 0 (pid {worker['pid']}) exited" in line
    info = run_info(bundle)
    assert info["status"] == "failed" and "worker 0" in info["failure"]
    assert table(bundle, "intervals").sent.sum() > 0  # what was measured before the crash is on disk


@pytest.mark.unit
def test_unknown_client_property_is_refused_before_anything_starts(tmp_path):
    workload = write_workload(tmp_path, "bad-prop", kafkaConfig={"producerConfig": {"lingr.ms": 5}})
    result = dimster("run", "local", "-w", str(workload), "--results", str(tmp_path / "r"))
    assert result.code == 2
    assert result.error_lines == [
        f'dimster: error: {workload}: kafkaConfig.producerConfig: No such configuration property: "lingr.ms"'
    ]
    assert not (tmp_path / "r").exists()


@pytest.mark.unit
def test_share_acquire_mode_is_refused_with_the_reason(tmp_path):
    workload = write_workload(tmp_path, "acquire")
    mode = "kafkaConfig.shareConsumerConfig.share.acquire.mode=record_limit"
    result = dimster("validate", str(workload), "--set", mode)
    assert result.code == 2
    assert "share.acquire.mode is not supported by librdkafka" in result.error_lines[0]


@pytest.mark.unit
def test_run_needs_a_workload():
    result = dimster("run", "local")
    assert result.code == 2 and "needs a workload: -w" in result.error_lines[0]
