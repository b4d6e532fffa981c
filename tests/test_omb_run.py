"""An OpenMessaging Benchmark workload and Kafka driver file run as they are, on the real `local`
cluster (issue 37): the driver's settings reach the run, what dimster ignores is said, and the run's
omb-result.json (OMB's TestResult) agrees with the run's own summary field by field."""

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


def test_an_omb_workload_and_driver_run_as_they_are_and_the_result_file_agrees_with_the_summary(
    tmp_path: Path, kept_spark
):
    (tmp_path / "payload").mkdir()
    payload = bytes(range(256))
    (tmp_path / "payload" / "payload-256b.data").write_bytes(payload)
    workload, driver = tmp_path / "workloads" / "omb.yaml", tmp_path / "kafka-latency.yaml"
    workload.parent.mkdir()
    workload.write_text(yaml.safe_dump(WORKLOAD))
    driver.write_text(DRIVER)
    results = tmp_path / "results"
    result = dimster(
        "run", "local", "-w", str(workload), "--driver", str(driver), "--results", str(results), "--no-summary"
    )
    assert result.code == 0, result.stderr + result.stdout
    assert "bootstrap.servers=localhost:9092 ignored" in result.stderr
    assert "enable.auto.commit ignored" in result.stderr
    [bundle] = list(results.iterdir())
    info = run_info(bundle)
    final = info["final_workload"]
    assert (final["consumerType"], final["clientLibrary"]["consumer"], final["replicationFactor"]) == (
        "CONSUMER_GROUP", "java", 1,
    )  # fmt: skip
    assert final["kafkaConfig"]["producerConfig"] == {"acks": "all", "linger.ms": "1"}
    assert (final["warmupSeconds"], final["durationSeconds"], final["messageDistributor"]) == (3, 15, "KEY_ROUND_ROBIN")
    no_loss(info)

    omb = json.loads((bundle / "omb-result.json").read_text())
    summary = summarized(bundle, kept_spark.master())
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
