"""The workload YAML: every key, its default and what is valid. Names follow OpenMessaging
Benchmark and the Dimster posts; Kafka property names are used as they are."""

from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dimster.errors import DimsterError
from dimster.paths import display
from dimster.workload.payload import HEADER_SIZE
from dimster.yamlfile import load_mapping, validation_error_line

Scalar = str | int | float | bool
KafkaProperties = dict[str, Scalar]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)


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
    """RANDOM bodies do not compress; COMPRESSIBLE ones repeat `compressibleRatio` of their bytes."""

    type: Literal["RANDOM", "COMPRESSIBLE"] = "RANDOM"
    compressible_ratio: float = Field(0.5, alias="compressibleRatio", ge=0, le=1)


class Acknowledgement(Strict):
    """Share groups: IMPLICIT accepts every record on the next poll; EXPLICIT accepts, releases or
    rejects each record with the given fractions (the rest is accepted)."""

    mode: Literal["IMPLICIT", "EXPLICIT"] = "IMPLICIT"
    release_fraction: float = Field(0.0, alias="releaseFraction", ge=0, le=1)
    reject_fraction: float = Field(0.0, alias="rejectFraction", ge=0, le=1)

    @model_validator(mode="after")
    def _fractions(self):
        if self.release_fraction + self.reject_fraction > 1:
            raise ValueError("releaseFraction + rejectFraction must be at most 1")
        if self.mode == "IMPLICIT" and (self.release_fraction or self.reject_fraction):
            raise ValueError("releaseFraction and rejectFraction need mode: EXPLICIT")
        return self


class KafkaConfig(Strict):
    common_config: KafkaProperties = Field(default_factory=dict, alias="commonConfig")
    producer_config: KafkaProperties = Field(default_factory=dict, alias="producerConfig")
    consumer_config: KafkaProperties = Field(default_factory=dict, alias="consumerConfig")
    share_consumer_config: KafkaProperties = Field(default_factory=dict, alias="shareConsumerConfig")
    topic_config: KafkaProperties = Field(default_factory=dict, alias="topicConfig")


Library = Literal["librdkafka", "java"]


class ClientLibrary(Strict):
    """Which client library each role runs: librdkafka (confluent-kafka) or Kafka's own Java clients
    (`java`, of the cluster's Kafka version, inside the worker process). `clientLibrary: java` sets all three."""

    producer: Library = "librdkafka"
    consumer: Library = "librdkafka"
    share_consumer: Library = Field("librdkafka", alias="shareConsumer")

    def of(self, role: str) -> Library:
        """The library of a role: producer, consumer or share_consumer."""
        return getattr(self, role)


def one_library_for_all(value):
    """`clientLibrary: java` is short for the same library in every role."""
    return {"producer": value, "consumer": value, "shareConsumer": value} if isinstance(value, str) else value


class Workload(Strict):
    name: str = Field(..., pattern=r"^[A-Za-z0-9._-]{1,80}$")
    topics: int = Field(1, ge=1, le=1000)
    partitions_per_topic: int = Field(1, alias="partitionsPerTopic", ge=1, le=10000)
    replication_factor: int | None = Field(None, alias="replicationFactor", ge=1)
    message_size: int = Field(1024, alias="messageSize", ge=HEADER_SIZE, le=10_000_000)
    payload: Payload = Field(default_factory=Payload)
    message_distributor: Literal["NO_KEY", "KEY_ROUND_ROBIN", "PINNED_PARTITIONS", "PARTITION_ZIPF"] = Field(
        "NO_KEY", alias="messageDistributor"
    )
    zipf_alpha: float = Field(1.0, alias="zipfAlpha", gt=0)
    key_count: int = Field(1000, alias="keyCount", ge=1)
    producers_per_topic: int = Field(1, alias="producersPerTopic", ge=0, le=1000)
    producer_rate: float = Field(1000, alias="producerRate", ge=0)
    producer_rate_schedule: RateSchedule | None = Field(None, alias="producerRateSchedule")
    consumer_type: Literal["SHARE_GROUP", "CONSUMER_GROUP"] = Field("SHARE_GROUP", alias="consumerType")
    groups_per_topic: int = Field(1, alias="groupsPerTopic", ge=0, le=100)
    consumers_per_group: int = Field(1, alias="consumersPerGroup", ge=0, le=5000)
    consumer_proc_ms_min: float = Field(0, alias="consumerProcMsMin", ge=0)
    consumer_proc_ms_max: float = Field(0, alias="consumerProcMsMax", ge=0)
    consumer_proc_parallelism: int = Field(1, alias="consumerProcParallelism", ge=-1)
    acknowledgement: Acknowledgement = Field(default_factory=Acknowledgement)
    warmup_seconds: float = Field(0, alias="warmupSeconds", ge=0)
    duration_seconds: float = Field(60, alias="durationSeconds", ge=0)
    report_interval_seconds: float = Field(10, alias="reportIntervalSeconds", gt=0)
    drain_timeout_seconds: float = Field(30, alias="drainTimeoutSeconds", ge=0)
    keep_topics: bool = Field(False, alias="keepTopics")
    client_library: ClientLibrary = Field(default_factory=ClientLibrary, alias="clientLibrary")
    kafka_config: KafkaConfig = Field(default_factory=KafkaConfig, alias="kafkaConfig")
    broker_config: KafkaProperties = Field(default_factory=dict, alias="brokerConfig")

    @field_validator("client_library", mode="before")
    @classmethod
    def _one_library_for_all(cls, value):
        if isinstance(value, str) and value not in get_args(Library):
            raise ValueError("must be librdkafka or java, or a mapping of producer, consumer, shareConsumer to one")
        return one_library_for_all(value)

    @model_validator(mode="after")
    def _consistent(self):
        if self.consumer_proc_ms_max < self.consumer_proc_ms_min:
            raise ValueError(
                f"consumerProcMsMax ({self.consumer_proc_ms_max}) is below consumerProcMsMin "
                f"({self.consumer_proc_ms_min})"
            )
        if self.consumer_proc_parallelism == 0:
            raise ValueError("consumerProcParallelism is 1 (serial), N (in flight per consumer) or -1 (whole poll)")
        if self.acknowledgement.mode == "EXPLICIT" and self.consumer_type != "SHARE_GROUP":
            raise ValueError("acknowledgement mode EXPLICIT needs consumerType: SHARE_GROUP")
        return self

    @property
    def total_producers(self) -> int:
        return self.topics * self.producers_per_topic

    @property
    def total_consumers(self) -> int:
        return self.topics * self.groups_per_topic * self.consumers_per_group

    def to_yaml_dict(self) -> dict:
        return self.model_dump(by_alias=True, exclude_none=True)


def parse_workload(data: dict, source: str) -> Workload:
    try:
        return Workload.model_validate(data)
    except ValidationError as e:
        raise DimsterError(validation_error_line(source, e, Workload)) from None


def load_workload(path: Path, sets: list[tuple[str, str]] = ()) -> Workload:
    """Read and validate a workload file, with `--set` overrides applied first."""
    from dimster.workload.overrides import apply_overrides

    data = load_mapping(path, "workload")
    if sets:
        if "clientLibrary" in data:  # so that --set clientLibrary.producer=... works on the short form too
            data["clientLibrary"] = one_library_for_all(data["clientLibrary"])
        data = apply_overrides(data, sets)
    return parse_workload(data, display(path))
