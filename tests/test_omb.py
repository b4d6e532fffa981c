"""OpenMessaging Benchmark files as they are (issue 37, items 1 and 2): an OMB workload is recognised
by its keys and translated into dimster's, OMB's semantics winning where they differ; a driver file's
Java-properties blocks become the run's settings; bad files are one line each. No broker."""

import base64
from pathlib import Path

import pytest
import yaml

from dimster.errors import DimsterError
from dimster.workload import omb

pytestmark = pytest.mark.unit

REPO = Path(__file__).parent.parent
# OMB's workloads/1-topic-16-partitions-1kb.yaml, as shipped (license header dropped)
SIMPLE = {
    "name": "1 topic / 16 partitions / 1Kb",
    "topics": 1,
    "partitionsPerTopic": 16,
    "messageSize": 1024,
    "payloadFile": "payload/payload-1Kb.data",
    "subscriptionsPerTopic": 1,
    "consumerPerSubscription": 1,
    "producersPerTopic": 1,
    "producerRate": 50000,
    "consumerBacklogSizeGB": 0,
    "testDurationMinutes": 15,
}
DRIVER = """name: Kafka
driverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver
replicationFactor: 3
reset: true
topicConfig: |
  min.insync.replicas=2
commonConfig: |
  bootstrap.servers=localhost:9092
  default.api.timeout.ms=1200000
producerConfig: |
  acks=all
  linger.ms=1
  batch.size=1048576
consumerConfig: |
  auto.offset.reset=earliest
  enable.auto.commit=false
"""


def write(folder: Path, data: dict, name: str = "w.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(data))
    return path


def with_payload(folder: Path, size: int = 1024) -> None:
    (folder / "payload").mkdir(exist_ok=True)
    (folder / "payload" / "payload-1Kb.data").write_bytes(bytes(range(256)) * (size // 256))


def native(path: Path, sets=(), driver=None) -> tuple[dict, list, list[str]]:
    notes: list[str] = []
    doc, after = omb.native_document(path, yaml.safe_load(path.read_text()), list(sets), driver, notes)
    return doc, after, notes


def test_an_omb_file_is_known_by_its_keys_and_a_mixed_one_is_refused():
    assert omb.is_omb(SIMPLE, "w.yaml")
    assert not omb.is_omb({"name": "q", "topics": 2, "producerRate": 10}, "w.yaml")  # shared keys only: native
    for path in sorted((REPO / "run" / "workloads").rglob("*.yaml")):
        assert not omb.is_omb(yaml.safe_load(path.read_text()), str(path)), path  # dimster's own files
    with pytest.raises(DimsterError, match=r"mixes OpenMessaging Benchmark keys \(.*\) with keys that are not"):
        omb.is_omb({**SIMPLE, "durationSeconds": 5}, "w.yaml")
    with pytest.raises(DimsterError, match="an OMB workload-set template"):
        omb.is_omb({**SIMPLE, "nameFormat": "x-${topics}"}, "w.yaml")


def test_a_simple_omb_file_becomes_dimsters_workload_with_omb_semantics(tmp_path):
    with_payload(tmp_path)
    doc, after, notes = native(write(tmp_path, SIMPLE))
    payload = base64.b64decode(doc.pop("payload")["data"])
    assert payload == (tmp_path / "payload" / "payload-1Kb.data").read_bytes()
    assert doc == {
        "name": "1-topic-16-partitions-1Kb",
        "topics": 1, "partitionsPerTopic": 16, "messageSize": 1024, "producersPerTopic": 1,
        "consumerType": "CONSUMER_GROUP", "groupsPerTopic": 1, "consumersPerGroup": 1,
        "warmupSeconds": 60, "durationSeconds": 900, "clientLibrary": "java",
        "ombResult": {"workload": "1 topic / 16 partitions / 1Kb", "driver": "Kafka"},
        "messageDistributor": "NO_KEY", "producerRate": 50000,
    }  # fmt: skip
    assert after == [] and notes == []


def test_omb_keys_in_set_apply_before_translation_and_dimsters_after(tmp_path):
    with_payload(tmp_path)
    sets = [("testDurationMinutes", "1"), ("consumerType", "SHARE_GROUP"), ("warmupDurationMinutes", "0")]
    doc, after, _ = native(write(tmp_path, SIMPLE), sets)
    assert doc["durationSeconds"] == 60 and doc["warmupSeconds"] == 0
    assert after == [("consumerType", "SHARE_GROUP")]


def test_randomized_payloads_keys_max_rate_and_backlog(tmp_path):
    randomized = {**SIMPLE, "useRandomizedPayloads": True, "randomBytesRatio": 0.5, "randomizedPayloadPoolSize": 1000}
    del randomized["payloadFile"]
    doc, _, _ = native(write(tmp_path, {**randomized, "keyDistributor": "RANDOM_NANO", "producerRate": 0}))
    assert doc["payload"] == {"type": "COMPRESSIBLE", "compressibleRatio": 0.5, "zeros": True, "count": 1000}
    assert (doc["messageDistributor"], doc["keyCount"]) == ("KEY_RANDOM", 10_000)
    assert doc["mode"] == {"type": "max-rate"} and doc["producerRate"] == 10_000  # OMB's 0: the search
    backlog = {**randomized, "consumerBacklogSizeGB": 1, "backlogDrainRatio": 0.5, "producerRate": 100_000}
    doc, _, _ = native(write(tmp_path, backlog))
    assert doc["mode"] == {
        "type": "drain-backlog", "backlogBytes": 2**30, "residualRate": 100_000,
        "emptyAtRecords": 2**29 // 1024, "afterDrainSeconds": 900, "buildAfterWarmup": True,
        "buildTimeoutSeconds": 600, "drainTimeoutSeconds": 300,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ({"payloadFile": "payload/missing.data"}, "payloadFile payload/missing.data does not exist (looked in "),
        ({"messageSize": 1000}, "payloadFile payload/payload-1Kb.data is 1024 bytes, messageSize is 1000"),
        ({"messageSize": 10}, "messageSize 10: dimster's records start with a 23-byte header"),
        ({"payloadFile": None}, "no payload: set useRandomizedPayloads: true or a payloadFile"),
        ({"useRandomizedPayloads": True}, "useRandomizedPayloads needs randomizedPayloadPoolSize of 1 or more"),
        ({"producerRate": 0, "consumerBacklogSizeGB": 1}, "consumerBacklogSizeGB needs a producerRate"),
        ({"keyDistributor": "RANDOM"}, "key 'keyDistributor'"),
        ({"testDurationMinute": 1}, "testDurationMinute"),
        ({"backlogDrainRatio": 2}, "key 'backlogDrainRatio'"),
    ],
)
def test_a_bad_omb_file_is_one_line(tmp_path, change, line):
    with_payload(tmp_path)
    data = {k: v for k, v in {**SIMPLE, **change}.items() if v is not None}
    with pytest.raises(DimsterError) as raised:
        native(write(tmp_path, data))
    assert line in str(raised.value) and "\n" not in str(raised.value)


def test_java_properties_as_java_reads_them():
    text = "# comment\n! also\n\na=1\nb : 2\nc 3\nd=x\\\n   y\ne=tab\\there\nf=\\u0041\ng\nh==v\na=last\n"
    assert omb.java_properties(text) == {
        "a": "last", "b": "2", "c": "3", "d": "xy", "e": "tab\there", "f": "A", "g": "", "h": "=v",
    }  # fmt: skip


def test_a_driver_file_sets_clients_and_topics_and_says_what_it_ignores(tmp_path):
    with_payload(tmp_path)
    driver = tmp_path / "kafka-throughput.yaml"
    driver.write_text(DRIVER)
    doc, _, notes = native(write(tmp_path, SIMPLE), driver=driver)
    assert doc["replicationFactor"] == 3 and doc["ombResult"]["driver"] == "Kafka"
    assert doc["kafkaConfig"] == {
        "commonConfig": {"default.api.timeout.ms": "1200000"},
        "producerConfig": {"acks": "all", "linger.ms": "1", "batch.size": "1048576"},
        "consumerConfig": {"auto.offset.reset": "earliest"},
        "topicConfig": {"min.insync.replicas": "2"},
    }
    said = [note.split(": ", 1)[1].split(" ")[0] for note in notes]
    assert said == ["reset", "bootstrap.servers=localhost:9092", "enable.auto.commit"]
    driver.write_text(DRIVER.replace("kafka.KafkaBenchmarkDriver", "pulsar.PulsarBenchmarkDriver"))
    with pytest.raises(DimsterError, match="is not OMB's Kafka driver"):
        native(write(tmp_path, SIMPLE), driver=driver)
    driver.write_text(DRIVER + "producerConfigs: x\n")
    with pytest.raises(DimsterError, match="producerConfigs"):
        native(write(tmp_path, SIMPLE), driver=driver)


def test_import_writes_the_native_workload_commented_with_where_each_key_came_from(tmp_path):
    from tests.cli import dimster

    with_payload(tmp_path)
    (tmp_path / "workloads").mkdir()
    workload = write(tmp_path / "workloads", SIMPLE, "simple.yaml")  # the payload sits beside workloads/
    driver = tmp_path / "kafka.yaml"
    driver.write_text(DRIVER)
    out = tmp_path / "mine" / "native.yaml"
    out.parent.mkdir()
    result = dimster("import", "omb", str(workload), "--driver", str(driver), "-o", str(out))
    assert result.code == 0, result.stderr
    text = out.read_text()
    assert "# from OMB's subscriptionsPerTopic\ngroupsPerTopic: 1\n" in text
    assert "# OMB's subscriptions are consumer groups\nconsumerType: CONSUMER_GROUP\n" in text
    assert "durationSeconds: 900\n" in text and "file: ../payload/payload-1Kb.data\n" in text and "data:" not in text
    assert dimster("validate", str(out)).code == 0  # it runs as it is, its payload file found
    native = write(tmp_path, {"name": "q", "durationSeconds": 5}, "native.yaml")
    refused = dimster("import", "omb", str(native), "-o", str(tmp_path / "x.yaml"))
    assert refused.code == 2 and "is not an OpenMessaging Benchmark workload" in refused.error_lines[0]


def test_an_omb_campaign_runs_every_workload_with_every_driver_in_omb_s_order(tmp_path):
    from dimster.campaign.model import load_campaign
    from tests.cli import dimster

    with_payload(tmp_path)
    b = write(tmp_path, {**SIMPLE, "name": "b"}, "b-run.yaml")
    a = write(tmp_path, {**SIMPLE, "name": "a"}, "a-run.yaml")
    latency, throughput = tmp_path / "kafka-latency.yaml", tmp_path / "kafka-throughput.yaml"
    one_node = DRIVER.replace("replicationFactor: 3", "replicationFactor: 1")  # `local` has one broker
    latency.write_text(one_node.replace("linger.ms=1", "linger.ms=0"))
    throughput.write_text(one_node)
    drivers = [str(latency), str(throughput)]
    spec = {"workloads": [str(b), str(a)], "drivers": drivers, "sets": ["testDurationMinutes=1"]}
    campaign = load_campaign(write(tmp_path, {"name": "omb", "omb": spec, "thresholds": ["lost == 0"]}, "c.yaml"))
    assert [(p.index, p.values["workload"], p.values["driver"]) for p in campaign.points] == [
        (1, "a-run", "kafka-latency"), (2, "a-run", "kafka-throughput"),
        (3, "b-run", "kafka-latency"), (4, "b-run", "kafka-throughput"),
    ]  # fmt: skip
    first = campaign.points[0].workload
    assert first.name == "omb-p1" and first.duration_seconds == 60 and first.omb_result is not None
    assert first.kafka_config.producer_config["linger.ms"] == "0"
    assert [t.threshold for t in first.thresholds] == ["lost == 0"]
    assert (first.omb_result.workload, first.omb_result.driver) == ("a", "Kafka")
    with pytest.raises(DimsterError, match="no dimensions and no mode"):
        dimensions = [{"key": "producerRate", "values": [1]}]
        load_campaign(write(tmp_path, {"name": "o", "omb": spec, "dimensions": dimensions}))
    with pytest.raises(DimsterError, match="two workloads named a-run"):
        load_campaign(write(tmp_path, {"name": "o", "omb": {"workloads": [str(a), str(a)]}}))
    listed = dimster(
        "campaign", "local", "--omb", str(b), str(a), "--driver", str(latency), "--set", "testDurationMinutes=1",
        "--dry-run", "--results", str(tmp_path / "campaigns"),
    )  # fmt: skip
    assert listed.code == 0, listed.stderr
    assert "workload=a-run, driver=kafka-latency" in listed.stdout and "2 run(s) of 'omb'" in listed.stdout
    assert dimster("campaign", "local", "--omb", str(a), "--drivers", "x").code == 2


def test_omb_result_asks_any_run_for_the_result_file(tmp_path):
    from dimster.workload.model import load_workload

    native = write(tmp_path, {"name": "mine", "consumerType": "SHARE_GROUP"}, "mine.yaml")
    assert load_workload(native).omb_result is None
    asked = load_workload(native, omb_result=True).omb_result
    assert asked is not None and (asked.workload, asked.driver) == (None, "Kafka")
