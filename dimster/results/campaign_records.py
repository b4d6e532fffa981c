"""The files a campaign writes, as types: campaign.json (`CampaignJson`) and
campaign/summary/summary.json (`CampaignSummaryJson`). See records.py for a run's."""

from typing import Any, NotRequired

# pydantic reads TypedDicts of typing_extensions only, below Python 3.12
from typing_extensions import TypedDict

from dimster.results.records import ThresholdResult


# ---- campaign.json ----------------------------------------------------------------------------------
class CampaignDimension(TypedDict):
    keys: list[str]
    values: list[list[Any]]  # a value per key, per point (a secret's as `***N`)


class PointRecord(TypedDict):
    """One run of a point (`index`) in its `repeat`, and where it stands."""

    index: int
    repeat: int
    values: dict[str, Any]  # key -> value, every dimension's keys
    label: str
    status: str  # pending, running, completed, forced, failed, interrupted, not started
    bundle: str | None  # its run folder, in the campaign folder
    exit_code: int | None
    failure: str | None
    started: float | None
    ended: float | None
    modifications: int  # live changes made by hand during the run
    mode: dict[str, Any] | None  # the run's run.json `mode`
    totals: dict[str, Any] | None  # the run's run.json `totals`
    aborted_by: NotRequired[str | None]  # the abortOnFail threshold that stopped the run early


class CampaignJson(TypedDict):
    """campaign.json: the points and where each stands, rewritten after every change."""

    name: str
    campaign_file: str
    fingerprint: str
    environment: str
    workers: int | None  # `--workers N`; null: the environment's own
    created: float
    ended: float | None
    mode: dict[str, Any]
    dimensions: list[CampaignDimension]
    repeat: int
    thresholds: list[str | dict[str, Any]]  # every point's (the base workload's and the campaign's)
    saturatedPhases: NotRequired[str]  # the base workload's: `judge` judges saturated points' latencies too
    points: list[PointRecord]


# ---- campaign/summary/summary.json -----------------------------------------------------------------
class PointRun(TypedDict):
    repeat: int
    status: str
    bundle: str | None


class MetricStats(TypedDict):
    """A metric over a point's summarized runs (stddev: two or more)."""

    mean: float | None
    min: float | None
    max: float | None
    stddev: float | None


class PointSummary(TypedDict):
    point: int
    label: str
    values: dict[str, Any]
    status: str
    repeats: int
    runs: list[PointRun]
    metrics: dict[str, MetricStats]  # per column of the runs table


class CampaignThresholdResult(ThresholdResult):
    """A threshold judged on the point's mean over its repeats; `repeats` has the left side's value in each."""

    repeats: list[float | None]


class PointVerdict(TypedDict):
    """`passed` is null, and `thresholds` empty, for a point whose runs did not complete."""

    point: int
    label: str
    status: str
    passed: bool | None
    thresholds: list[CampaignThresholdResult]


class CampaignVerdict(TypedDict):
    passed: bool
    points: list[PointVerdict]


class CampaignSummaryJson(TypedDict):
    """campaign/summary/summary.json: per point, each metric over its repeats."""

    campaign: str
    dimensions: list[str]
    metrics: list[str]
    points: list[PointSummary]
    notes: list[str]
    verdict: NotRequired[CampaignVerdict | None]  # null when the campaign has no thresholds
