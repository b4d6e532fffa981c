"""OpenMessaging Benchmark (OMB) workload and Kafka driver files, run as they are: an OMB file is
recognised by its keys and translated into dimster's own workload, where OMB's semantics win over
dimster's defaults (a minute of warm-up, consumer groups, Kafka's Java clients, OMB's payloads, its
backlog and max-rate runs). A driver file's Java-properties blocks become the run's client and topic
settings. docs/omb.md has the key-by-key mapping."""

import base64
import math
import os
import re
from collections.abc import Collection
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError

from dimster.errors import DimsterError
from dimster.workload.payload import HEADER_SIZE
from dimster.workload.strict import Strict
from dimster.yamlfile import closest, load_mapping, validation_error_line

GIB = 1024**3
KEYS = 10_000  # OMB's KeyDistributor.UNIQUE_COUNT
KAFKA_DRIVER = "io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver"


class OmbWorkload(Strict):
    """OMB's Workload.java: every key, with OMB's own default."""

    name: str | None = None
    topics: int = 0
    partitions_per_topic: int = Field(0, alias="partitionsPerTopic")
    key_distributor: Literal["NO_KEY", "KEY_ROUND_ROBIN", "RANDOM_NANO"] = Field("NO_KEY", alias="keyDistributor")
    message_size: int = Field(0, alias="messageSize")
    use_randomized_payloads: bool = Field(False, alias="useRandomizedPayloads")
    random_bytes_ratio: float = Field(0.0, alias="randomBytesRatio", ge=0, le=1)
    randomized_payload_pool_size: int = Field(0, alias="randomizedPayloadPoolSize", ge=0)
    payload_file: str | None = Field(None, alias="payloadFile")
    subscriptions_per_topic: int = Field(0, alias="subscriptionsPerTopic", ge=0)
    consumer_per_subscription: int = Field(0, alias="consumerPerSubscription", ge=0)
    producers_per_topic: int = Field(0, alias="producersPerTopic", ge=0)
    producer_rate: float = Field(0, alias="producerRate", ge=0)
    consumer_backlog_size_gb: int = Field(0, alias="consumerBacklogSizeGB", ge=0)
    backlog_drain_ratio: float = Field(1.0, alias="backlogDrainRatio", ge=0, le=1)
    test_duration_minutes: float = Field(0, alias="testDurationMinutes", ge=0)
    warmup_duration_minutes: float = Field(1, alias="warmupDurationMinutes", ge=0)


class OmbDriver(Strict):
    """OMB's Kafka driver file (driver-kafka/*.yaml)."""

    name: str | None = None
    driver_class: str | None = Field(None, alias="driverClass")
    replication_factor: int | None = Field(None, alias="replicationFactor", ge=1)
    reset: bool | None = None  # removed from OMB in 2022 (it deleted every topic of the cluster)
    topic_config: str | None = Field(None, alias="topicConfig")
    common_config: str | None = Field(None, alias="commonConfig")
    producer_config: str | None = Field(None, alias="producerConfig")
    consumer_config: str | None = Field(None, alias="consumerConfig")


def aliases(model: type[Strict]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


SHARED = {"name", "topics", "partitionsPerTopic", "messageSize", "producersPerTopic", "producerRate"}
OMB_KEYS = aliases(OmbWorkload)
OMB_ONLY = OMB_KEYS - SHARED


def is_omb(data: dict, source: str, dimster_keys: Collection[str] = ()) -> bool:
    """Whether a workload document is OMB's: one of OMB's own keys and none of dimster's. A key of
    neither, close to one of OMB's, is told as a misspelt OMB key."""
    if "nameFormat" in data or any(isinstance(v, list) for k, v in data.items() if k in OMB_KEYS):
        raise DimsterError(
            f"{source}: an OMB workload-set template (nameFormat, lists of values): generate its workloads "
            "with OMB's tool first"
        )
    omb = sorted(k for k in data if k in OMB_ONLY)
    if not omb:
        return False
    native = sorted(k for k in data if k not in OMB_ONLY and k not in SHARED)
    misspelt = [(key, hint) for key in native if key not in dimster_keys and (hint := closest(key, OMB_KEYS))]
    if misspelt:
        raise DimsterError(f"{source}: unknown OpenMessaging Benchmark key '{misspelt[0][0]}'{misspelt[0][1]}")
    if native:
        raise DimsterError(
            f"{source}: mixes OpenMessaging Benchmark keys ({', '.join(omb[:3])}) with keys that are not "
            f"OMB's ({', '.join(native[:3])}): an OMB workload takes OMB's keys only; give dimster's with --set"
        )
    return True


def java_properties(text: str) -> dict[str, str]:
    """Java's Properties.load: comments, continued lines, `=`, `:` or blanks between key and value,
    escapes; a repeated key's last value wins."""
    logical, pending = [], ""
    for line in text.splitlines():
        stripped = line.lstrip(" \t\f")
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2:
            pending += stripped[:-1]
            continue
        logical.append(pending + stripped)
        pending = ""
    if pending:
        logical.append(pending)
    found = {}
    for line in logical:
        match = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:]?\s*(.*)$", line, re.S)
        key, value = match.groups() if match else (line, "")
        found[_unescape(key)] = _unescape(value)
    return found


def _unescape(text: str) -> str:
    def one(match: re.Match) -> str:
        code = match.group(1)
        if code.startswith("u"):
            return chr(int(code[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(code, code)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text)


def slug(name: str | None, stem: str) -> str:
    """An OMB name as a dimster workload name (it names folders, topics and groups)."""
    for candidate in (name or "", stem):
        cut = re.sub(r"[^A-Za-z0-9._-]+", "-", candidate).strip("-")[:80]
        if cut:
            return cut
    return "omb"


def find_payload_file(name: str, workload: Path) -> Path:
    """OMB's payloadFile, relative to the working directory as OMB reads it (then the workload's
    folder, and its parent: an OMB checkout's layout)."""
    path = Path(name)
    folders = [Path.cwd(), workload.parent, workload.parent.parent]
    places = [path] if path.is_absolute() else [folder / path for folder in folders]
    found = next((p for p in places if p.is_file()), None)
    if found is None:
        looked = ", ".join(str(p.parent) for p in places)
        raise DimsterError(f"{workload}: payloadFile {name} does not exist (looked in {looked})")
    return found


def read_payload_file(name: str, workload: Path, size: int) -> bytes:
    """OMB's payloadFile: the whole file is one payload, of messageSize bytes."""
    data = find_payload_file(name, workload).read_bytes()
    if len(data) != size:
        raise DimsterError(
            f"{workload}: payloadFile {name} is {len(data)} bytes, messageSize is {size} (OMB: Payload length mismatch)"
        )
    return data


def translate(omb: OmbWorkload, path: Path, notes: list[str]) -> dict:
    """The dimster workload an OMB file describes."""
    if omb.message_size < HEADER_SIZE:
        raise DimsterError(
            f"{path}: messageSize {omb.message_size}: dimster's records start with a {HEADER_SIZE}-byte header "
            f"(producer, sequence, intended send time), so {HEADER_SIZE} or more"
        )
    doc: dict = {
        "name": slug(omb.name, path.stem),
        "topics": omb.topics,
        "partitionsPerTopic": omb.partitions_per_topic,
        "messageSize": omb.message_size,
        "producersPerTopic": omb.producers_per_topic,
        "consumerType": "CONSUMER_GROUP",  # OMB's subscriptions are consumer groups
        "groupsPerTopic": omb.subscriptions_per_topic,
        "consumersPerGroup": omb.consumer_per_subscription,
        "warmupSeconds": whole(60 * omb.warmup_duration_minutes),
        "durationSeconds": whole(60 * omb.test_duration_minutes),
        "clientLibrary": "java",  # OMB runs Kafka's Java clients, and drivers carry Java-only properties
        "ombResult": {"workload": omb.name or path.stem, "driver": "Kafka"},
    }
    doc |= _keys(omb) | {"payload": _payload(omb, path, notes)}
    if omb.producer_rate > 0:
        doc["producerRate"] = whole(omb.producer_rate)
    elif omb.consumer_backlog_size_gb:
        raise DimsterError(
            f"{path}: consumerBacklogSizeGB needs a producerRate: OMB cannot probe the sustainable rate while "
            "building a backlog"
        )
    else:  # OMB's producerRate 0: find the highest rate producers and consumers sustain
        doc |= {"producerRate": 10_000, "mode": {"type": "max-rate"}}
    if omb.consumer_backlog_size_gb:
        doc["mode"] = _backlog(omb)
    return doc


def whole(value: float) -> float | int:
    """A number as an int when it is one (OMB's minutes are often whole)."""
    return int(value) if float(value).is_integer() else value


def _keys(omb: OmbWorkload) -> dict:
    if omb.key_distributor == "NO_KEY":
        return {"messageDistributor": "NO_KEY"}
    kind = "KEY_ROUND_ROBIN" if omb.key_distributor == "KEY_ROUND_ROBIN" else "KEY_RANDOM"
    return {"messageDistributor": kind, "keyCount": KEYS}


def _payload(omb: OmbWorkload, path: Path, notes: list[str]) -> dict:
    if omb.use_randomized_payloads:
        if omb.randomized_payload_pool_size < 1:
            raise DimsterError(
                f"{path}: useRandomizedPayloads needs randomizedPayloadPoolSize of 1 or more (OMB would send nothing)"
            )
        if omb.payload_file:
            notes.append(f"{path}: payloadFile is not read with useRandomizedPayloads: true, as in OMB")
        return {
            "type": "COMPRESSIBLE",
            "compressibleRatio": round(1 - omb.random_bytes_ratio, 6),
            "zeros": True,
            "count": omb.randomized_payload_pool_size,
        }
    if not omb.payload_file:
        raise DimsterError(
            f"{path}: no payload: set useRandomizedPayloads: true or a payloadFile (OMB fails on neither)"
        )
    data = read_payload_file(omb.payload_file, path, omb.message_size)
    return {"type": "FILE", "file": omb.payload_file, "data": base64.b64encode(data).decode()}


def _backlog(omb: OmbWorkload) -> dict:
    """OMB's backlog run: after warm-up, consumers pause until the backlog holds the size, resume with
    producers at full rate, and the drain ends at the drain ratio's level; then the test's length."""
    size = omb.consumer_backlog_size_gb * GIB
    records = size / omb.message_size
    seconds = math.ceil(3 * records / omb.producer_rate)
    return {
        "type": "drain-backlog",
        "backlogBytes": size,
        "residualRate": whole(omb.producer_rate),
        "emptyAtRecords": max(1000, math.floor((1 - omb.backlog_drain_ratio) * records)),
        "afterDrainSeconds": whole(60 * omb.test_duration_minutes),
        "buildAfterWarmup": True,
        "buildTimeoutSeconds": max(600, seconds),
        "drainTimeoutSeconds": max(300, seconds),
    }


def apply_driver(doc: dict, driver_path: Path, notes: list[str]) -> dict:
    """An OMB Kafka driver file's settings over a workload document (file < driver < --set)."""
    source = str(driver_path)
    try:
        driver = OmbDriver.model_validate(load_mapping(driver_path, "driver"))
    except ValidationError as e:
        raise DimsterError(validation_error_line(source, e, OmbDriver)) from None
    if driver.driver_class and driver.driver_class != KAFKA_DRIVER:
        raise DimsterError(
            f"{source}: driverClass {driver.driver_class} is not OMB's Kafka driver ({KAFKA_DRIVER}): "
            "dimster drives Kafka only"
        )
    if driver.reset is not None:
        notes.append(f"{source}: reset ignored: dimster creates fresh topics per run and deletes only those")
    doc = {**doc, "kafkaConfig": dict(doc.get("kafkaConfig") or {})}
    if driver.replication_factor is not None:
        doc["replicationFactor"] = driver.replication_factor
    sections = {
        "commonConfig": driver.common_config,
        "producerConfig": driver.producer_config,
        "consumerConfig": driver.consumer_config,
        "topicConfig": driver.topic_config,
    }
    for section, text in sections.items():
        if text is None:
            continue
        properties = java_properties(text)
        if servers := properties.pop("bootstrap.servers", None):
            notes.append(f"{source}: bootstrap.servers={servers} ignored: the run uses the environment's brokers")
        if properties.pop("enable.auto.commit", None) is not None:
            notes.append(
                f"{source}: enable.auto.commit ignored: dimster's consumer groups commit automatically "
                "(OMB commits each poll itself)"
            )
        doc["kafkaConfig"][section] = {**(doc["kafkaConfig"].get(section) or {}), **properties}
    if "ombResult" in doc:
        doc["ombResult"] = {**doc["ombResult"], "driver": driver.name or driver_path.stem}
    return doc


def split_sets(pairs: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """--set pairs on an OMB file: OMB's own keys apply before translation, dimster's after."""
    before = [(k, v) for k, v in pairs if k.split(".")[0] in OMB_KEYS]
    return before, [(k, v) for k, v in pairs if k.split(".")[0] not in OMB_KEYS]


def native_document(
    path: Path, data: dict, sets: list[tuple[str, str]], driver: Path | None, notes: list[str]
) -> tuple[dict, list[tuple[str, str]]]:
    """An OMB file (with its OMB --set pairs applied) as dimster's workload document, and the --set
    pairs left for it."""
    from dimster.workload.overrides import apply_overrides

    before, after = split_sets(sets)
    if before:
        data = apply_overrides(data, before)
    try:
        omb = OmbWorkload.model_validate(data)
    except ValidationError as e:
        raise DimsterError(validation_error_line(str(path), e, OmbWorkload)) from None
    doc = translate(omb, path, notes)
    if driver is not None:
        doc = apply_driver(doc, driver, notes)
    return doc, after


# where each key of a translated workload came from, for `dimster import omb`
SOURCES = {
    "consumerType": "OMB's subscriptions are consumer groups",
    "groupsPerTopic": "from OMB's subscriptionsPerTopic",
    "consumersPerGroup": "from OMB's consumerPerSubscription",
    "warmupSeconds": "from OMB's warmupDurationMinutes (OMB's default is 1)",
    "durationSeconds": "from OMB's testDurationMinutes",
    "clientLibrary": "OMB runs Kafka's Java clients",
    "ombResult": "omb-result.json's names: OMB's name, and the driver's",
    "messageDistributor": "from OMB's keyDistributor",
    "keyCount": "OMB's 10,000 keys",
    "payload": "from OMB's useRandomizedPayloads, randomBytesRatio, randomizedPayloadPoolSize, payloadFile",
    "mode": "from OMB's producerRate 0 (max-rate), or consumerBacklogSizeGB and backlogDrainRatio",
    "replicationFactor": "from the driver's replicationFactor",
    "kafkaConfig": "from the driver's commonConfig, producerConfig, consumerConfig, topicConfig",
}


def imported(path: Path, driver: Path | None, out: Path, notes: list[str]) -> str:
    """The native workload an OMB file (and driver) runs as, as YAML text commented with the OMB key
    each key came from; a payload file is named relative to `out`'s folder, not inlined."""
    data = load_mapping(path, "workload")
    if not is_omb(data, str(path)):
        raise DimsterError(f"{path} is not an OpenMessaging Benchmark workload (it has none of OMB's own keys)")
    doc, _ = native_document(path, data, [], driver, notes)
    payload = doc.get("payload") or {}
    if payload.get("type") == "FILE":
        found = find_payload_file(payload["file"], path).resolve()
        doc["payload"] = {"type": "FILE", "file": os.path.relpath(found, out.resolve().parent)}
    driven = f" and driver {driver.name}" if driver else ""
    lines = [f"# imported from the OpenMessaging Benchmark workload {path.name}{driven}"]
    for key, value in doc.items():
        lines.append("# " + SOURCES.get(key, "from OMB's " + key))
        lines.append(yaml.safe_dump({key: value}, sort_keys=False, allow_unicode=True).rstrip())
    return "\n".join(lines) + "\n"
