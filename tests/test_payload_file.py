"""Payloads as OpenMessaging Benchmark writes them: a file's bytes (payload.type FILE), zero bytes after
the random part (payload.zeros), a set number of distinct bodies (payload.count), and random keys
(messageDistributor KEY_RANDOM)."""

import base64
import random
import time
from pathlib import Path

import pytest
import yaml

from dimster.campaign.model import parse_campaign
from dimster.errors import DimsterError
from dimster.worker.clients.drivers import producer_driver
from dimster.worker.protocol import ProducerSpec
from dimster.workload.distributor import distributor
from dimster.workload.model import load_workload, parse_workload
from dimster.workload.payload import HEADER_SIZE, make_bodies, unpack_header
from tests.conftest import dimster, one_error_line, unused_port, write_environment

pytestmark = pytest.mark.unit

FILE_BYTES = bytes(range(256)) * 4  # 1024 bytes, none of them dimster's header


def write_workload(folder: Path) -> Path:
    """w.yaml in `folder`, its payload file payload/payload-1Kb.data beside it (OMB's layout)."""
    (folder / "payload").mkdir(exist_ok=True)
    (folder / "payload" / "payload-1Kb.data").write_bytes(FILE_BYTES)
    path = folder / "w.yaml"
    path.write_text("name: file-payload\nmessageSize: 1024\npayload: {type: FILE, file: payload/payload-1Kb.data}\n")
    return path


def refusal(data: dict) -> str:
    with pytest.raises(DimsterError) as e:
        parse_workload(data, "w.yaml")
    assert "\n" not in str(e.value)
    return str(e.value)


def file_doc(data: bytes, size: int = 1024, **extra) -> dict:
    payload = {"type": "FILE", "file": "x.data", "data": base64.b64encode(data).decode()}
    return {"name": "w", "messageSize": size, "payload": payload, **extra}


# payload.type FILE


def test_a_produced_value_is_the_header_then_the_file_from_its_23rd_byte(tmp_path, monkeypatch):
    from confluent_kafka import KafkaException, Producer

    from dimster.clients import librdkafka

    sent: list[bytes] = []

    class Recording(Producer):  # no broker: no metadata wait, and each value the driver produces is kept
        def list_topics(self, *args, **kwargs):
            raise KafkaException("no broker here")

        def produce(self, topic, value, *args):
            sent.append(value)
            return super().produce(topic, value, *args)

    monkeypatch.setattr(librdkafka, "Producer", Recording)
    workload = load_workload(write_workload(tmp_path))
    spec = ProducerSpec(producer_id=7, topic="nowhere", index_in_topic=0)
    driver = producer_driver(workload, "127.0.0.1:9", "p0", spec, lambda _: None, {})
    intended = time.time()
    driver.send(40, [intended] * 3, [(None, -1)] * 3)
    driver.close(0.2)
    assert len(sent) == 3
    for sequence, value in enumerate(sent, start=40):
        assert len(value) == 1024
        assert unpack_header(value) == (7, sequence, int(intended * 1e9))
        assert value[HEADER_SIZE:] == FILE_BYTES[HEADER_SIZE:]


def test_the_file_is_read_from_the_workload_folder_then_the_working_directory(tmp_path, monkeypatch):
    path = write_workload(tmp_path)
    loaded = load_workload(path)
    assert loaded.payload.file == "payload/payload-1Kb.data" and loaded.payload.file_bytes() == FILE_BYTES
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = elsewhere / "w.yaml"
    path.rename(moved)
    monkeypatch.chdir(tmp_path)  # the file is not beside the workload, but in the working directory
    assert load_workload(moved).payload.file_bytes() == FILE_BYTES


def test_a_bundles_workload_with_data_needs_no_file(tmp_path):
    loaded = load_workload(write_workload(tmp_path))
    (tmp_path / "payload" / "payload-1Kb.data").unlink()
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(loaded.to_yaml_dict()))
    assert load_workload(again).payload.file_bytes() == FILE_BYTES


def test_a_set_payload_file_is_read_in_place_of_the_data_it_had(tmp_path):
    loaded = load_workload(write_workload(tmp_path))
    other = bytes(reversed(FILE_BYTES))
    (tmp_path / "payload" / "other.data").write_bytes(other)
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(loaded.to_yaml_dict()))
    assert load_workload(again, [("payload.file", "payload/other.data")]).payload.file_bytes() == other


def test_a_missing_file_is_one_line_naming_it_and_where_it_looked(tmp_path, monkeypatch):
    path = write_workload(tmp_path)
    (tmp_path / "payload" / "payload-1Kb.data").unlink()
    monkeypatch.chdir(tmp_path / "payload")
    with pytest.raises(DimsterError) as e:
        load_workload(path)
    line = str(e.value)
    assert "\n" not in line and "payload.file payload/payload-1Kb.data does not exist" in line
    assert str(tmp_path) in line and str(tmp_path / "payload") in line, line


def test_a_file_of_another_size_than_message_size_is_one_line():
    assert refusal(file_doc(FILE_BYTES[:1000])).endswith("payload.data is 1000 bytes, messageSize is 1024")


def test_correctness_refuses_a_file_payload():
    assert "correctness" in refusal(file_doc(FILE_BYTES, mode="correctness"))


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"type": "FILE"}, "needs payload.file"),
        ({"type": "RANDOM", "file": "x.data"}, "need type FILE, not RANDOM"),
        ({"type": "FILE", "data": "not base64!"}, "must be base64"),
        ({"type": "FILE", "data": base64.b64encode(FILE_BYTES).decode(), "count": 2}, "one body"),
        ({"type": "FILE", "file": "x.data"}, "was not read"),
    ],
)
def test_a_file_payload_that_cannot_be_run_is_refused(payload, words):
    assert words in refusal({"name": "w", "messageSize": 1024, "payload": payload})


def test_validate_and_run_accept_a_file_workload(tmp_path, project):
    path = write_workload(tmp_path)
    result = dimster("validate", str(path))
    assert result.code == 0 and "ok: 'file-payload'" in result.stdout, result.stderr
    free_port = unused_port()
    write_environment(project, "gone", f"backend: external\nbootstrapServers: 127.0.0.1:{free_port}\n")
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    result = dimster("run", "gone", "-w", str(path), "--results", str(tmp_path / "r"), env=env)
    one_error_line(result, "is unreachable", code=3)  # the workload was taken: the cluster is what fails
    (tmp_path / "payload" / "payload-1Kb.data").unlink()
    one_error_line(dimster("validate", str(path)), "w.yaml", "payload.file payload/payload-1Kb.data does not exist")


def test_a_campaign_base_reads_its_file_beside_the_campaign(tmp_path):
    write_workload(tmp_path)
    document = {"name": "grid", "base": "w.yaml", "dimensions": [{"key": "producerRate", "values": [1, 2]}]}
    campaign = parse_campaign(document, "grid.yaml", tmp_path / "grid.yaml")
    assert [p.workload.payload.file_bytes() for p in campaign.points] == [FILE_BYTES, FILE_BYTES]
    document["dimensions"] = [{"key": "payload.file", "values": ["a.data", "b.data"]}]
    with pytest.raises(DimsterError, match=r"'payload\.file' cannot be a dimension"):
        parse_campaign(document, "grid.yaml", tmp_path / "grid.yaml")


# payload.zeros and payload.count


def test_zeros_put_zero_bytes_after_the_random_part():
    for body in make_bodies(HEADER_SIZE + 1000, "COMPRESSIBLE", 0.75, count=3, seed=4, zeros=True):
        assert len(body) == 1000
        assert body[250:] == bytes(750)
        assert body[:250].count(0) < 10  # random: about one zero in 256


def test_count_sets_how_many_distinct_bodies_a_producer_rotates_through(monkeypatch):
    from confluent_kafka import KafkaException, Producer

    from dimster.clients import librdkafka

    class NoMetadataWait(Producer):
        def list_topics(self, *args, **kwargs):
            raise KafkaException("no broker here")

    monkeypatch.setattr(librdkafka, "Producer", NoMetadataWait)
    spec = ProducerSpec(producer_id=1, topic="nowhere", index_in_topic=0)
    for count, compression in [(3, "none"), (5, "lz4")]:
        config = {"producerConfig": {"compression.type": compression}}
        payload = {"type": "COMPRESSIBLE", "zeros": True, "count": count}
        workload = parse_workload({"name": "w", "payload": payload, "kafkaConfig": config}, "w.yaml")
        driver = producer_driver(workload, "127.0.0.1:9", "p0", spec, lambda _: None, {})
        assert len(set(driver.bodies)) == count
        driver.close(0.1)
    assert "greater than or equal to 1" in refusal({"name": "w", "payload": {"count": 0}})


# messageDistributor KEY_RANDOM


def test_key_random_picks_keys_within_key_count_and_varies():
    workload = parse_workload({"name": "w", "messageDistributor": "KEY_RANDOM", "keyCount": 10}, "w.yaml")
    choose = distributor(workload.message_distributor, 3, 0, key_count=workload.key_count, rng=random.Random(5))
    keys = [choose() for _ in range(2000)]
    assert {partition for _, partition in keys} == {-1}  # the partitioner hashes the key
    assert {key for key, _ in keys} == {f"key-{i}".encode() for i in range(10)}
    assert [key for key, _ in keys[:10]] != [f"key-{i}".encode() for i in range(10)]  # not round robin
    assert len({tuple(keys[i : i + 5]) for i in range(0, 100, 5)}) > 15  # runs of five rarely repeat


# ombResult


def test_omb_result_takes_its_defaults_and_refuses_unknown_keys():
    workload = parse_workload({"name": "w", "ombResult": {}}, "w.yaml")
    assert workload.omb_result is not None
    assert (workload.omb_result.workload, workload.omb_result.driver) == (None, "Kafka")
    assert parse_workload({"name": "w"}, "w.yaml").omb_result is None
    assert "unknown key 'ombResult.drivers'" in refusal({"name": "w", "ombResult": {"drivers": "x"}})


def test_a_payload_file_cannot_change_live_and_the_rest_of_the_payload_can():
    from dimster.coordinator.live.changes import live_changes

    before = {"name": "w", "payload": {"type": "COMPRESSIBLE", "compressibleRatio": 0.5}}
    after = {"name": "w", "payload": {"type": "COMPRESSIBLE", "compressibleRatio": 0.9, "zeros": True}}
    assert [c.key for c in live_changes(before, after)] == ["payload.compressibleRatio", "payload.zeros"]
    to_file = {"name": "w", "payload": {"type": "FILE", "file": "x", "data": "AAAA"}}
    with pytest.raises(ValueError, match=r"'payload\.data' cannot change during a run: a payload file is read when"):
        live_changes(before, to_file)
