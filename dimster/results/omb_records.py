"""omb-result.json as a type: OpenMessaging Benchmark's TestResult (its TestResult.java), every field
in its order and nothing more, since OMB's ResultsToCsv refuses a file with a key it does not know.
dimster/schemas.py publishes it as schemas/omb-result.schema.json; results/omb_result.py writes it.

Units are OMB's: rates in messages (or errors) per second, publish and end-to-end latencies in
milliseconds, publish delay in microseconds (whole, but for the average). A list has an entry per
10 s window of the measured phase, never none (OMB's create_charts.py fails on a list empty in every
file); a quantile map is percentile level ("0.5", "99.9", "100.0") -> value, empty for no records."""

from typing import Annotated

from pydantic import ConfigDict, Field, StringConstraints, with_config

# pydantic reads TypedDicts of typing_extensions only, below Python 3.12
from typing_extensions import TypedDict

Floats = Annotated[list[float], Field(min_length=1)]
Ints = Annotated[list[int], Field(min_length=1)]
Level = Annotated[str, StringConstraints(pattern=r"^[0-9]+\.[0-9]+$")]  # Java's Double.toString of 0-100


@with_config(ConfigDict(extra="forbid"))
class OmbTestResult(TypedDict):
    """OMB's result of one workload on one driver (`bin/benchmark`'s JSON file)."""

    workload: str
    driver: str
    messageSize: int
    topics: int
    partitions: int
    producersPerTopic: int
    consumersPerTopic: int

    publishRate: Floats
    publishErrorRate: Floats
    consumeRate: Floats
    backlog: Ints

    publishLatencyAvg: Floats
    publishLatency50pct: Floats
    publishLatency75pct: Floats
    publishLatency95pct: Floats
    publishLatency99pct: Floats
    publishLatency999pct: Floats
    publishLatency9999pct: Floats
    publishLatencyMax: Floats

    publishDelayLatencyAvg: Floats
    publishDelayLatency50pct: Ints
    publishDelayLatency75pct: Ints
    publishDelayLatency95pct: Ints
    publishDelayLatency99pct: Ints
    publishDelayLatency999pct: Ints
    publishDelayLatency9999pct: Ints
    publishDelayLatencyMax: Ints

    aggregatedPublishLatencyAvg: float
    aggregatedPublishLatency50pct: float
    aggregatedPublishLatency75pct: float
    aggregatedPublishLatency95pct: float
    aggregatedPublishLatency99pct: float
    aggregatedPublishLatency999pct: float
    aggregatedPublishLatency9999pct: float
    aggregatedPublishLatencyMax: float

    aggregatedPublishDelayLatencyAvg: float
    aggregatedPublishDelayLatency50pct: int
    aggregatedPublishDelayLatency75pct: int
    aggregatedPublishDelayLatency95pct: int
    aggregatedPublishDelayLatency99pct: int
    aggregatedPublishDelayLatency999pct: int
    aggregatedPublishDelayLatency9999pct: int
    aggregatedPublishDelayLatencyMax: int

    aggregatedPublishLatencyQuantiles: dict[Level, float]
    aggregatedPublishDelayLatencyQuantiles: dict[Level, int]

    endToEndLatencyAvg: Floats
    endToEndLatency50pct: Floats
    endToEndLatency75pct: Floats
    endToEndLatency95pct: Floats
    endToEndLatency99pct: Floats
    endToEndLatency999pct: Floats
    endToEndLatency9999pct: Floats
    endToEndLatencyMax: Floats

    aggregatedEndToEndLatencyQuantiles: dict[Level, float]

    aggregatedEndToEndLatencyAvg: float
    aggregatedEndToEndLatency50pct: float
    aggregatedEndToEndLatency75pct: float
    aggregatedEndToEndLatency95pct: float
    aggregatedEndToEndLatency99pct: float
    aggregatedEndToEndLatency999pct: float
    aggregatedEndToEndLatency9999pct: float
    aggregatedEndToEndLatencyMax: float
