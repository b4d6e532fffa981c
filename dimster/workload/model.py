"""The workload YAML: every key, its default and what is valid. Names follow OpenMessaging
Benchmark and the Dimster posts; Kafka property names are used as they are."""

import base64
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from dimster.client_libraries import LIBRARIES
from dimster.errors import DimsterError
from dimster.paths import display
from dimster.secret_keys import MASK, is_secret_key
from dimster.workload import omb
from dimster.workload.acknowledgement import Acknowledgement
from dimster.workload.clients import ClientLibrary, ClientVersion, client_version_problem, same_for_every_role
from dimster.workload.dead_letter import DeadLetterQueue
from dimster.workload.kafka_sections import acknowledgement_mode_problem, unused_section_notes
from dimster.workload.modes import MODES, Mode, mode_mapping
from dimster.workload.modes import problem as mode_problem
from dimster.workload.modes.steady import Steady
from dimster.workload.payload import HEADER_SIZE, with_file_data
from dimster.workload.strict import Strict
from dimster.workload.thresholds import Threshold, threshold_problem
from dimster.yamlfile import load_mapping, validation_error_line

Scalar = str | int | float | bool
KafkaProperties = dict[str, Scalar]


class RateSegment(Strict):
    """Either a constant `rate`, or a ramp from `fromRate` to `toRate`, for `durationSeconds`."""

    rate: float | None = Field(None, ge=0)
    from_rate: float | None = Field(None, alias="fromRate", ge=0)
    to_rate: float | None = Field(None, alias="toRate", ge=0)
    duration_seconds: float = Field(..., alias="durationSeconds", gt=0)

    @model_validator(mode="after")
    def _constant_or_ramp(self):
        ramp = self.from_rate is not None and self.to_rate is not None
        ramp_part = self.from_rate is not None or self.to_rate is not None
        if (self.rate is None) == (not ramp) or (self.rate is not None and ramp_part):
            raise ValueError("a segment has either 'rate', or both 'fromRate' and 'toRate'")
        return self


class RateSchedule(Strict):
    type: Literal["REPEATING", "ONCE"] = "ONCE"
    segments: list[RateSegment] = Field(..., min_length=1)


class Payload(Strict):
    """RANDOM bodies do not compress; COMPRESSIBLE ones repeat `compressibleRatio` of their bytes (zero
    bytes after the random part with `zeros`); FILE values are a file's bytes after dimster's header."""

    type: Literal["RANDOM", "COMPRESSIBLE", "FILE"] = "RANDOM"
    compressible_ratio: float = Field(0.5, alias="compressibleRatio", ge=0, le=1)
    zeros: bool = False
    count: int | None = Field(None, ge=1)  # distinct bodies per producer; None: as many as compression needs
    file: str | None = None  # FILE: the file, as written; read into `data` when the workload is loaded
    data: str | None = None  # FILE: the base64 of the whole file, messageSize bytes

    @model_validator(mode="after")
    def _file(self):
        given = self.data is not None or self.file is not None
        if self.type == "FILE" and not given:
            raise ValueError("type FILE needs payload.file (or payload.data, the file's base64)")
        if self.type != "FILE" and given:
            raise ValueError(f"payload.file and payload.data need type FILE, not {self.type} (or set them to null)")
        if self.type == "FILE" and self.count is not None:
            raise ValueError("a FILE payload is one body: drop payload.count")
        if self.data is not None:
            try:
                base64.b64decode(self.data, validate=True)
            except ValueError:
                raise ValueError("payload.data must be base64 (the whole file)") from None
        return self

    def file_bytes(self) -> bytes:
        return base64.b64decode(self.data or "")


class OmbResult(Strict):
    """Write omb-result.json (OpenMessaging Benchmark's TestResult) into the bundle."""

    workload: str | None = None  # TestResult.workload: OMB's charts group by it; None: the workload's name
    driver: str = "Kafka"  # TestResult.driver: the series' name


class FlowControl(Strict):
    """Consumer groups: before every poll a consumer pauses `pausedFraction` of its assigned partitions
    (a new random choice each poll, or a window that moves one partition a poll) and resumes the rest,
    as a stream processor under back-pressure does (KAFKA-7548). It always leaves one partition to fetch."""

    paused_fraction: float = Field(0.0, alias="pausedFraction", ge=0, lt=1)
    pattern: Literal["random", "rotate"] = "random"


class ConsumerCrash(Strict):
    """`consumers` share consumers crash `atSeconds` after load starts (see coordinator/live/crashes.py)."""

    at_seconds: float = Field(..., alias="atSeconds", ge=0)
    consumers: int = Field(1, ge=1)


WEEK_SECONDS = 7 * 24 * 3600
MAX_RUN_SECONDS = 31 * 24 * 3600  # a month's soak; beyond, a typo rather than a test
MAX_RATE = 1e9  # msg/s of a run's producers: a thousand times the largest clusters' rates
MAX_CLIENTS = 100_000  # producers and consumers of one run: beyond, a typo rather than a test
# the share groups' acquisition lock: the group config that sets it (the brokers' default is group.<this>),
# and Kafka's default
LOCK_DURATION = "share.record.lock.duration.ms"
DEFAULT_LOCK_MS = 30_000
HEALS = {"kill": "start", "pause": "resume", "isolate": "rejoin", "isolate-all": "rejoin"}  # fault -> its undoing


class BrokerFault(Strict):
    """A fault on node `node` of the run's cluster `atSeconds` after load starts, healed
    `durationSeconds` later (a killed node starts again on its data, a paused one resumes, an
    isolated one rejoins); a restart heals itself. See coordinator/live/faults.py."""

    at_seconds: float = Field(..., alias="atSeconds", ge=0, le=WEEK_SECONDS)
    action: Literal["kill", "pause", "restart", "isolate", "isolate-all"]
    node: int = Field(..., ge=0)
    duration_seconds: float | None = Field(None, alias="durationSeconds", gt=0, le=WEEK_SECONDS)

    @model_validator(mode="after")
    def _healing(self):
        if self.action == "restart" and self.duration_seconds is not None:
            raise ValueError("a restart heals itself: drop durationSeconds")
        return self


class KafkaConfig(Strict):
    common_config: KafkaProperties = Field(default_factory=dict, alias="commonConfig")
    producer_config: KafkaProperties = Field(default_factory=dict, alias="producerConfig")
    consumer_config: KafkaProperties = Field(default_factory=dict, alias="consumerConfig")
    share_consumer_config: KafkaProperties = Field(default_factory=dict, alias="shareConsumerConfig")
    topic_config: KafkaProperties = Field(default_factory=dict, alias="topicConfig")


class Workload(Strict):
    name: str = Field(..., pattern=r"^[A-Za-z0-9._-]{1,80}$")
    topics: int = Field(1, ge=1, le=1000)
    partitions_per_topic: int = Field(1, alias="partitionsPerTopic", ge=1, le=10000)
    replication_factor: int | None = Field(None, alias="replicationFactor", ge=1)
    message_size: int = Field(1024, alias="messageSize", ge=HEADER_SIZE, le=10_000_000)
    payload: Payload = Field(default_factory=Payload)
    message_distributor: Literal["NO_KEY", "KEY_ROUND_ROBIN", "KEY_RANDOM", "PINNED_PARTITIONS", "PARTITION_ZIPF"] = (
        Field("NO_KEY", alias="messageDistributor")
    )
    zipf_alpha: float = Field(1.0, alias="zipfAlpha", gt=0)
    key_count: int = Field(1000, alias="keyCount", ge=1)
    producers_per_topic: int = Field(1, alias="producersPerTopic", ge=0, le=1000)
    producer_rate: float = Field(1000, alias="producerRate", ge=0, le=MAX_RATE)
    producer_rate_schedule: RateSchedule | None = Field(None, alias="producerRateSchedule")
    consumer_type: Literal["SHARE_GROUP", "CONSUMER_GROUP"] = Field("SHARE_GROUP", alias="consumerType")
    groups_per_topic: int = Field(1, alias="groupsPerTopic", ge=0, le=100)
    consumers_per_group: int = Field(1, alias="consumersPerGroup", ge=0, le=5000)
    consumer_proc_ms_min: float = Field(0, alias="consumerProcMsMin", ge=0)
    consumer_proc_ms_max: float = Field(0, alias="consumerProcMsMax", ge=0)
    consumer_proc_parallelism: int = Field(1, alias="consumerProcParallelism", ge=-1)
    acknowledgement: Acknowledgement = Field(default_factory=Acknowledgement)
    consumers_paused: bool = Field(False, alias="consumersPaused")  # paused consumers hold no Kafka client
    # consumer groups: each consumer a static member (KIP-345), its group.instance.id its client id
    static_membership: bool = Field(False, alias="staticMembership")
    flow_control: FlowControl = Field(default_factory=FlowControl, alias="flowControl")
    consumer_crashes: list[ConsumerCrash] = Field(default_factory=list, alias="consumerCrashes")
    faults: list[BrokerFault] = Field(default_factory=list)
    warmup_seconds: float = Field(0, alias="warmupSeconds", ge=0, le=WEEK_SECONDS)
    duration_seconds: float = Field(60, alias="durationSeconds", ge=0, le=MAX_RUN_SECONDS)
    report_interval_seconds: float = Field(10, alias="reportIntervalSeconds", gt=0, le=3600)
    drain_timeout_seconds: float = Field(30, alias="drainTimeoutSeconds", ge=0, le=WEEK_SECONDS)
    keep_topics: bool = Field(False, alias="keepTopics")
    client_library: ClientLibrary = Field(default_factory=ClientLibrary, alias="clientLibrary")
    client_version: ClientVersion = Field(default_factory=ClientVersion, alias="clientVersion")
    kafka_config: KafkaConfig = Field(default_factory=KafkaConfig, alias="kafkaConfig")
    broker_config: KafkaProperties = Field(default_factory=dict, alias="brokerConfig")
    # dynamic group configs (share.record.lock.duration.ms, ...) of every group of the run
    group_config: KafkaProperties = Field(default_factory=dict, alias="groupConfig")
    dead_letter_queue: DeadLetterQueue | None = Field(None, alias="deadLetterQueue")  # Kafka 4.4, KIP-1191
    mode: Mode = Field(default_factory=Steady)
    thresholds: list[Threshold] = Field(default_factory=list)  # what the run must meet to pass
    # latency and rate verdicts on a phase whose load generator was saturated (diagnosis/generator.py):
    # undecided, or judged all the same
    saturated_phases: Literal["undecided", "judge"] = Field("undecided", alias="saturatedPhases")
    omb_result: OmbResult | None = Field(None, alias="ombResult")  # write omb-result.json too

    @model_validator(mode="before")
    @classmethod
    def _finite(cls, data):
        if where := non_finite(data):
            got = MASK if is_secret_key(where[0]) else where[1]
            raise ValueError(f"key '{where[0]}': must be a finite number (got {got})")
        return data

    @field_validator("mode", mode="before")
    @classmethod
    def _mode_name(cls, value):
        if isinstance(value, str) and value not in MODES:
            raise ValueError(f"must be one of {', '.join(MODES)} (or a mapping with 'type')")
        return mode_mapping(value)

    @field_validator("client_library", mode="before")
    @classmethod
    def _same_for_every_role(cls, value):
        if isinstance(value, str) and value not in LIBRARIES:
            names = " or ".join(LIBRARIES)
            raise ValueError(f"must be {names}, or a mapping of producer, consumer, shareConsumer to one")
        return same_for_every_role(value)

    @field_validator("client_version", mode="before")
    @classmethod
    def _one_version_for_all(cls, value):
        return same_for_every_role(value)

    @model_validator(mode="after")
    def _consistent(self):
        if self.total_producers + self.total_consumers > MAX_CLIENTS:
            raise ValueError(
                f"{self.total_producers:,} producers (topics {self.topics} x producersPerTopic "
                f"{self.producers_per_topic}) and {self.total_consumers:,} consumers (topics {self.topics} "
                f"x groupsPerTopic {self.groups_per_topic} x consumersPerGroup {self.consumers_per_group}) "
                f"are more than the {MAX_CLIENTS:,} clients a run may have"
            )
        if self.consumer_proc_ms_max < self.consumer_proc_ms_min:
            raise ValueError(
                f"consumerProcMsMax ({self.consumer_proc_ms_max}) is below consumerProcMsMin "
                f"({self.consumer_proc_ms_min})"
            )
        if self.consumer_proc_parallelism == 0:
            raise ValueError("consumerProcParallelism is 1 (serial), N (in flight per consumer) or -1 (whole poll)")
        if self.acknowledgement.mode == "EXPLICIT" and self.consumer_type != "SHARE_GROUP":
            raise ValueError("acknowledgement mode EXPLICIT needs consumerType: SHARE_GROUP")
        if self.static_membership and self.consumer_type != "CONSUMER_GROUP":
            raise ValueError("staticMembership needs consumerType: CONSUMER_GROUP (share groups have none)")
        if self.flow_control.paused_fraction and self.consumer_type != "CONSUMER_GROUP":
            raise ValueError("flowControl needs consumerType: CONSUMER_GROUP (share consumers pause no partitions)")
        if self.dead_letter_queue and self.consumer_type != "SHARE_GROUP":
            raise ValueError("deadLetterQueue needs consumerType: SHARE_GROUP (consumer groups have none)")
        if self.consumer_crashes and self.consumer_type != "SHARE_GROUP":
            raise ValueError("consumerCrashes needs consumerType: SHARE_GROUP (share consumers crash, holding records)")
        if [c.at_seconds for c in self.consumer_crashes] != sorted(c.at_seconds for c in self.consumer_crashes):
            raise ValueError("consumerCrashes must be in order of atSeconds")
        if [f.at_seconds for f in self.faults] != sorted(f.at_seconds for f in self.faults):
            raise ValueError("faults must be in order of atSeconds")
        if self.acknowledgement.renew_locks and self.client_library.share_consumer != "java":
            raise ValueError(
                "acknowledgement.renewLocks needs Kafka's Java share consumer (librdkafka has no "
                "AcknowledgeType.RENEW): set clientLibrary.shareConsumer: java"
            )
        if problem := self._payload_problem():
            raise ValueError(problem)
        if problem := client_version_problem(
            self.run_roles(), self.client_version, self.client_library, self.static_membership
        ):
            raise ValueError(problem)
        if problem := acknowledgement_mode_problem(self.kafka_config, self.acknowledgement.mode, self.run_roles()):
            raise ValueError(problem)
        if problem := mode_problem(self):
            raise ValueError(problem)
        share, correctness = self.consumer_type == "SHARE_GROUP", self.mode.type == "correctness"
        queue = self.dead_letter_queue is not None
        if problem := threshold_problem(self.thresholds, self.total_consumers > 0, share, queue, correctness):
            raise ValueError(problem)
        return self

    def run_roles(self) -> list[str]:
        """The client roles this run has: producer, and consumer or share_consumer."""
        roles = ["producer"] if self.producers_per_topic else []
        if self.groups_per_topic and self.consumers_per_group:
            roles.append("share_consumer" if self.consumer_type == "SHARE_GROUP" else "consumer")
        return roles

    def _payload_problem(self) -> str | None:
        if self.payload.type != "FILE":
            return None
        if self.payload.data is None:
            return (
                f"payload.file {self.payload.file} was not read: it is read when a workload (or a campaign's base) "
                "is loaded, not from a live --set or a campaign dimension"
            )
        if (size := len(self.payload.file_bytes())) != self.message_size:
            return f"payload.data is {size} bytes, messageSize is {self.message_size}"
        if self.mode.type == "correctness":
            return "payload.type FILE cannot run in mode correctness (it writes its own checksummed bodies)"
        return None

    @property
    def total_producers(self) -> int:
        return self.topics * self.producers_per_topic

    @property
    def total_consumers(self) -> int:
        return self.topics * self.groups_per_topic * self.consumers_per_group

    @property
    def record_lock_ms(self) -> float | None:
        """The share groups' lock duration as this workload sets it: its groupConfig, else the brokers'
        default in its brokerConfig; None where it sets neither."""
        value = self.group_config.get(LOCK_DURATION) or self.broker_config.get(f"group.{LOCK_DURATION}")
        return float(value) if value else None

    def to_yaml_dict(self) -> dict:
        return self.model_dump(by_alias=True, exclude_none=True)


WORKLOAD_KEYS = frozenset(field.alias or name for name, field in Workload.model_fields.items())


def non_finite(data: object, path: str = "") -> tuple[str, float] | None:
    """The first key holding an infinite or not-a-number value (YAML's .inf, .nan), with it."""
    if isinstance(data, float) and not math.isfinite(data):
        return path, data
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        if found := non_finite(value, f"{path}.{key}" if path else str(key)):
            return found
    return None


def parse_workload(data: dict, source: str) -> Workload:
    try:
        return Workload.model_validate(data)
    except ValidationError as e:
        raise DimsterError(validation_error_line(source, e, Workload)) from None


def long_forms(data: dict) -> dict:
    """The document with its short forms written out (`clientLibrary: java`, `mode: explore-limits`),
    so that overrides of a nested key (`clientLibrary.producer`, `mode.targetE2eP99Ms`) find a mapping."""
    data = dict(data)
    for key in ("clientLibrary", "clientVersion"):
        if key in data:
            data[key] = same_for_every_role(data[key])
    if "mode" in data:
        data["mode"] = mode_mapping(data["mode"])
    return data


def load_workload(
    path: Path,
    sets: Sequence[tuple[str, str]] = (),
    driver: Path | None = None,
    omb_result: bool = False,
    notes: list[str] | None = None,
) -> Workload:
    """Read and validate a workload file, dimster's or OpenMessaging Benchmark's (workload/omb.py),
    with an OMB driver file's settings and `--set` overrides applied first; `notes` gets what was
    ignored, for the user. A `payload.file` is read relative to the workload file's folder, then the
    working directory."""
    from dimster.workload.overrides import apply_overrides

    notes = [] if notes is None else notes
    data, sets = load_mapping(path, "workload"), list(sets)
    if omb.is_omb(data, display(path), WORKLOAD_KEYS):
        data, sets = omb.native_document(path, data, sets, driver, notes)
    elif driver is not None:
        data = omb.apply_driver(data, driver, notes)
    if omb_result:
        data.setdefault("ombResult", {})
    if sets:
        if isinstance(data.get("payload"), dict) and any(key == "payload.file" for key, _ in sets):
            data["payload"] = {k: v for k, v in data["payload"].items() if k != "data"}  # a new file: read it
        data = apply_overrides(long_forms(data), sets)
    workload = parse_workload(with_file_data(data, [path.parent, Path.cwd()], display(path)), display(path))
    notes += unused_section_notes(workload.kafka_config, workload.run_roles())
    return workload
