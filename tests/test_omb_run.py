"""An OpenMessaging Benchmark workload with two Kafka driver files, run as they are by `dimster campaign
--omb` on the real `local` cluster (issue 37): one point per driver, each driver's settings reach its
run, what dimster ignores is said, and each run's omb-result.json (OMB's TestResult), copied under
OMB's own name, agrees with the run's own summary field by field."""

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import dimster
from tests.runs import no_loss, run_info, summarized

pytestmark = pytest.mark.kafka

WORKLOAD = {
    "name": "1 topic / 2 partitions / 256b",
    "topics": 1,
    "partitionsPerTopic": 2,
    "messageSize": 256,
    "payloadFile": "payload/payload-256b.data",
    "keyDistributor": "KEY_ROUND_ROBIN",
    "subscriptionsPerTopic": 1,
    "consumerPerSubscription": 2,
    "producersPerTopic": 1,
    "producerRate": 400,
    "consumerBacklogSizeGB": 0,
    "testDurationMinutes": 0.25,  # 15 s: two of OMB's 10 s windows, the second 5 s
    "warmupDurationMinutes": 0.05,
}
DRIVER = """name: Kafka-latency
driverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver
replicationFactor: 1
topicConfig: |
  min.insync.replicas=1
commonConfig: |
  bootstrap.servers=localhost:9092
  default.api.timeout.ms=120000
producerConfig: |
  acks=all
  linger.ms=1
consumerConfig: |
  auto.offset.reset=earliest
  enable.auto.commit=false
"""


def test_an_omb_workload_with_two_drivers_runs_as_a_campaign_and_each_result_file_agrees_with_its_summary(
    tmp_path: Path, spark
):
    (tmp_path / "payload").mkdir()
    payload = bytes(range(256))
    (tmp_path / "payload" / "payload-256b.data").write_bytes(payload)
    workload, driver = tmp_path / "workloads" / "omb.yaml", tmp_path / "kafka-latency.yaml"
    workload.parent.mkdir()
    workload.write_text(yaml.safe_dump(WORKLOAD))
    driver.write_text(DRIVER)
    other = tmp_path / "kafka-throughput.yaml"
    other.write_text(DRIVER.replace("Kafka-latency", "Kafka-throughput").replace("linger.ms=1", "linger.ms=20"))
    results = tmp_path / "campaigns"
    result = dimster(
        "campaign", "local", "--omb", str(workload), "--driver", str(driver), str(other), "--results", str(results),
        "--no-summary",
    )  # fmt: skip
    assert result.code == 0, result.stderr + result.stdout
    [folder] = [path for path in results.iterdir() if path.is_dir()]
    state = json.loads((folder / "campaign.json").read_text())
    assert [(p["values"]["driver"], p["status"]) for p in state["points"]] == [
        ("kafka-latency", "completed"), ("kafka-throughput", "completed"),
    ]  # fmt: skip
    copies = sorted(path.name for path in (folder / "campaign" / "omb").iterdir())
    assert [name.rsplit("-", 6)[0] for name in copies] == ["omb-kafka-latency", "omb-kafka-throughput"]
    second = run_info(folder / state["points"][1]["bundle"])
    assert second["final_workload"]["kafkaConfig"]["producerConfig"]["linger.ms"] == "20"
    bundle = folder / state["points"][0]["bundle"]
    assert "bootstrap.servers=localhost:9092 ignored" in result.stderr
    assert "enable.auto.commit ignored" in result.stderr
    info = run_info(bundle)
    final = info["final_workload"]
    assert (final["consumerType"], final["clientLibrary"]["consumer"], final["replicationFactor"]) == (
        "CONSUMER_GROUP", "java", 1,
    )  # fmt: skip
    assert final["kafkaConfig"]["producerConfig"] == {"acks": "all", "linger.ms": "1"}
    assert (final["warmupSeconds"], final["durationSeconds"], final["messageDistributor"]) == (3, 15, "KEY_ROUND_ROBIN")
    no_loss(info)

    omb = json.loads((bundle / "omb-result.json").read_text())
    summary = summarized(bundle, spark)
    assert (omb["workload"], omb["driver"]) == (WORKLOAD["name"], "Kafka-latency")
    assert (omb["topics"], omb["partitions"], omb["messageSize"], omb["consumersPerTopic"]) == (1, 2, 256, 2)
    windows = -(-summary["throughput"]["seconds"] // 10)  # one entry per 10 s window of the measured phase
    for series in ("publishRate", "consumeRate", "backlog", "publishLatency99pct", "endToEndLatency99pct"):
        assert len(omb[series]) == windows, series
    latency = summary["latency_ms"]
    for omb_name, ours in (("EndToEnd", "e2e"), ("Publish", "publish")):
        for stat, key in (("50pct", "p50"), ("99pct", "p99"), ("999pct", "p99_9"), ("Max", "max")):
            assert omb[f"aggregated{omb_name}Latency{stat}"] == pytest.approx(latency[ours][key], rel=1e-9), stat
    produced = summary["throughput"]["produced_msgs_per_s"]
    assert sum(omb["publishRate"]) / windows == pytest.approx(produced, rel=0.15)
    assert omb["aggregatedEndToEndLatencyQuantiles"] and all(v is not None for v in omb["publishRate"])


def test_omb_s_backlog_and_max_rate_files_run_as_omb_runs_them(tmp_path: Path):
    """Randomized payloads and RANDOM_NANO keys, with (1) a backlog: consumers pause after warm-up until
    it holds the size, producers keep their rate through the drain, which ends at the drain ratio's
    level, then the test's length; (2) producerRate 0: OMB's rate controller moves the rate."""
    randomized = {**WORKLOAD, "useRandomizedPayloads": True, "randomBytesRatio": 0.5, "randomizedPayloadPoolSize": 50}
    randomized |= {"keyDistributor": "RANDOM_NANO", "testDurationMinutes": 0.1, "warmupDurationMinutes": 0.05}
    del randomized["payloadFile"]
    backlog = tmp_path / "backlog.yaml"
    backlog.write_text(yaml.safe_dump({**randomized, "consumerBacklogSizeGB": 1, "backlogDrainRatio": 0.5}))
    results = tmp_path / "results"
    # 1 GiB is OMB's smallest backlog: the test builds 1,000,000 bytes (3,906 records) through dimster's own key
    result = dimster(
        "run", "local", "-w", str(backlog), "--results", str(results), "--no-summary",
        "--set", "clientLibrary=librdkafka", "mode.backlogBytes=1000000", "mode.emptyAtRecords=500",
    )  # fmt: skip
    assert result.code == 0, result.stderr + result.stdout
    [bundle] = list(results.iterdir())
    info = run_info(bundle)
    mode = info["mode"]
    assert mode["drained"] and mode["backlog_target"] == -(-1_000_000 // 256) and mode["residual_rate"] == 400
    assert mode["backlog_left"] <= 500  # OMB's drain ends at its level, not at an empty backlog
    events = [json.loads(line) for line in (bundle / "events.jsonl").read_text().splitlines()]
    paused = next(e for e in events if e["event"] == "plan")  # "building a backlog ... with consumers paused"
    assert "building a backlog" in paused["note"] and paused["time"] >= info["load_started"] + 3 - 0.5  # after warm-up
    no_loss(info)
    assert (bundle / "omb-result.json").is_file()

    searching = tmp_path / "max-rate.yaml"
    searching.write_text(yaml.safe_dump({**randomized, "producerRate": 0, "partitionsPerTopic": 4}))
    results = tmp_path / "searched"
    settings = ["--set", "clientLibrary=librdkafka"]
    result = dimster("run", "local", "-w", str(searching), "--results", str(results), "--no-summary", *settings)
    assert result.code == 0, result.stderr + result.stdout
    [bundle] = list(results.iterdir())
    info = run_info(bundle)
    mode = info["mode"]
    assert mode["type"] == "max-rate" and mode["start_rate_msgs_per_s"] == 10_000 and mode["adjustments"] >= 1
    assert {step["reason"] for step in mode["steps"]} <= {"no backlog", "publish backlog", "receive backlog"}
    changes = [json.loads(line) for line in (bundle / "modifications.jsonl").read_text().splitlines()]
    assert changes and all(c["by"] == "max-rate" for c in changes)
    no_loss(info)
