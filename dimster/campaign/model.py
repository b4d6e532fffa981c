"""A campaign file: one `base` workload run at every point of its `dimensions` (one key, or several
keys that co-vary; several dimensions make a cartesian product), each point `repeat` times, in the
test `mode` it names. Every point is a complete workload, validated before anything runs. A
dimension keyed `cluster.<key>` varies the environment instead (campaign/environments.py).

A secret's values (a dimension over `kafkaConfig.commonConfig.sasl.password`) live in the points'
workloads only: wherever a point shows (its label, campaign.yaml and .json, the page, the console)
each shows as `***N`, N its place among the dimension's values, so the points stay apart."""

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from dimster.campaign.environments import CLUSTER_PREFIX, check_cluster_key
from dimster.errors import DimsterError
from dimster.paths import display
from dimster.results.redaction import is_secret_key, secret_tag
from dimster.verdict.campaign import campaign_threshold_problem
from dimster.workload.model import Strict, Workload, load_workload, long_forms, parse_workload
from dimster.workload.modes import Mode, load_seconds, mode_mapping
from dimster.workload.overrides import PROPERTY_SECTIONS, apply_overrides, parse_set_arguments
from dimster.workload.payload import with_file_data
from dimster.workload.thresholds import Threshold
from dimster.yamlfile import load_mapping, validation_error_line


class Dimension(Strict):
    """`key` + `values`, or co-varying `keys` + `values` that are lists with one value per key."""

    key: str | None = None
    keys: list[str] | None = Field(None, min_length=1)
    values: list[Any] = Field(..., min_length=1)

    @model_validator(mode="after")
    def _shape(self):
        if (self.key is None) == (self.keys is None):
            raise ValueError("a dimension names either 'key' or 'keys'")
        if self.keys is not None:
            for position, value in enumerate(self.values, start=1):
                if not isinstance(value, list) or len(value) != len(self.keys):
                    got = secret_tag(position) if any(map(is_secret_key, self.keys)) else repr(value)
                    raise ValueError(f"each value of keys {self.keys} is a list of {len(self.keys)} values, got {got}")
        return self

    @model_validator(mode="before")
    @classmethod
    def _values_listed(cls, data):
        """Its values are a list: said here, where pydantic's error would echo a secret's value."""
        if isinstance(data, dict) and "values" in data and not isinstance(data["values"], list):
            raise ValueError("'values' is a list of the dimension's values")
        return data

    @property
    def names(self) -> list[str]:
        if self.keys is not None:
            return self.keys
        assert self.key is not None  # the validator: a dimension names either key or keys
        return [self.key]

    def rows(self) -> list[list[Any]]:
        """Its values, one list (a value per key) each."""
        return self.values if self.keys is not None else [[v] for v in self.values]

    def shown_rows(self) -> list[list[Any]]:
        """`rows()` as files and pages show them: a secret's values as `***N`."""
        return [
            [shown_value(key, value, position) for key, value in zip(self.names, row, strict=True)]
            for position, row in enumerate(self.rows(), start=1)
        ]

    def shown(self) -> dict[str, Any]:
        """The dimension as campaign.yaml records it: its values shown as `shown_rows()`."""
        rows = self.shown_rows()
        return {**self.model_dump(exclude_none=True), "values": rows if self.keys is not None else [r[0] for r in rows]}


def shown_value(key: str, value: Any, position: int) -> Any:
    """A dimension's value as it shows: `***N` for the value of a secret key (at any depth of a mapping)."""
    if is_secret_key(key):
        return secret_tag(position)
    if isinstance(value, dict):
        return {k: shown_value(k, v, position) for k, v in value.items()}
    return value


class OmbCampaign(Strict):
    """OpenMessaging Benchmark's benchmark command: every workload file with every driver file, one
    point each, as they are (workload/omb.py); paths relative to the campaign file."""

    workloads: list[str] = Field(..., min_length=1)
    drivers: list[str] = Field(default_factory=list)
    sets: list[str] = Field(default_factory=list)  # k=v, on every point, as `dimster run --set` takes them


class CampaignFile(Strict):
    name: str = Field(..., pattern=r"^[A-Za-z0-9._-]{1,60}$")
    base: str | dict[str, Any] | None = None  # a workload file (relative to the campaign file) or the workload
    omb: OmbCampaign | None = None  # in place of base and dimensions
    dimensions: list[Dimension] = Field(default_factory=list)
    repeat: int = Field(1, ge=1, le=100)
    mode: Mode | None = None  # overrides the base workload's
    thresholds: list[Threshold] = Field(default_factory=list)  # added to the base workload's, for every point

    @model_validator(mode="before")
    @classmethod
    def _mode_name(cls, data):
        if isinstance(data, dict) and "mode" in data:
            data = {**data, "mode": mode_mapping(data["mode"])}
        return data

    @model_validator(mode="after")
    def _base_or_omb(self):
        if (self.base is None) == (self.omb is None):
            raise ValueError("a campaign has a base workload or an omb list of workload files, one of them")
        if self.omb and (self.dimensions or self.mode):
            raise ValueError("an omb campaign's points are its files: no dimensions and no mode (the files say it)")
        return self


@dataclass
class Point:
    index: int  # 1-based, shared by the repeats of one point
    repeat: int  # 1..repeat
    values: dict[str, Any]  # key -> value as it shows (a secret's as `***N`), every dimension's keys
    workload: Workload  # the point's workload, with the values themselves
    environment: dict[str, Any] = field(default_factory=dict)  # its `cluster.` values, by environment key

    @property
    def label(self) -> str:
        return label(self.values)

    @property
    def tag(self) -> str:
        return f"point {self.index}" + (f" repeat {self.repeat}" if self.repeat > 1 else "")


@dataclass
class Campaign:
    file: CampaignFile
    source: str  # where it came from, for error lines
    path: Path  # the campaign file, resolved: a resume reads it again
    base: dict[str, Any]  # the base workload document, resolved (a path read, mode applied)
    points: list[Point]
    notes: list[str] = field(default_factory=list)  # what its files asked for that dimster ignores

    def recorded(self) -> dict[str, Any]:
        """The campaign with its base inlined, as campaign.yaml records it: the dimensions' secrets as
        `***N` (the base's are masked where it is written)."""
        return {
            **self.file.model_dump(by_alias=True, exclude_none=True),
            "dimensions": [d.shown() for d in self.file.dimensions],
            "base": self.base,
        }


def label(values: dict[str, Any]) -> str:
    """A point's values as the console and the page name it: `linger.ms=5, sasl.password=***2`."""
    return ", ".join(f"{short_key(k)}={v}" for k, v in values.items())


def short_key(key: str) -> str:
    """A key as a label shows it: a client's Kafka property without its section."""
    for section in PROPERTY_SECTIONS:
        if section.startswith("kafkaConfig.") and key.startswith(section + "."):
            return key[len(section) + 1 :]
    return key


def read_campaign_json(campaign_dir: Path) -> dict[str, Any]:
    """campaign.json of `campaign_dir`; a DimsterError when there is none or it is unreadable."""
    path = campaign_dir / "campaign.json"
    try:
        campaign = json.loads(path.read_text())
    except FileNotFoundError:
        raise DimsterError(f"{campaign_dir} is not a dimster campaign folder (no campaign.json)") from None
    except (OSError, ValueError) as e:
        raise DimsterError(f"{path} is unreadable: {str(e).splitlines()[0]}") from None
    if not isinstance(campaign, dict) or not isinstance(campaign.get("points", []), list):
        raise DimsterError(f"{path} is not a campaign file (no list of points)")
    return campaign


def load_campaign(path: Path) -> Campaign:
    return parse_campaign(load_mapping(path, "campaign"), display(path), path.resolve())


def parse_campaign(data: dict, source: str, path: Path) -> Campaign:
    try:
        file = CampaignFile.model_validate(data)
    except ValidationError as e:
        raise DimsterError(validation_error_line(source, e, CampaignFile)) from None
    if file.omb is not None:
        recorded = {"omb": file.omb.model_dump(), "thresholds": [t.model_dump(by_alias=True) for t in file.thresholds]}
        notes: list[str] = []
        return Campaign(file, source, path, recorded, _omb_points(file, source, path, notes), notes)
    assert file.base is not None
    base_file = path.parent / file.base if isinstance(file.base, str) else path
    base = long_forms(load_mapping(base_file, f"{source}: base workload") if isinstance(file.base, str) else file.base)
    base = with_file_data(base, [base_file.parent, Path.cwd()], source)  # a payload.file of the base
    if file.mode is not None:
        base["mode"] = file.mode.model_dump(by_alias=True)
    if file.thresholds:
        base["thresholds"] = [*(base.get("thresholds") or []), *(t.model_dump(by_alias=True) for t in file.thresholds)]
    if problem := campaign_threshold_problem(base.get("thresholds") or []):
        raise DimsterError(f"{source}: {problem}")
    keys = [k for d in file.dimensions for k in d.names]
    if duplicated := sorted({k for k in keys if keys.count(k) > 1}):
        raise DimsterError(f"{source}: key '{duplicated[0]}' is in more than one dimension")
    if "name" in keys or "mode" in keys or any(k.startswith("mode.") for k in keys):
        raise DimsterError(f"{source}: 'name' and 'mode' cannot be dimensions (a campaign has one mode)")
    if "thresholds" in keys:
        raise DimsterError(f"{source}: 'thresholds' cannot be a dimension (every point is judged alike)")
    if "payload.file" in keys:
        raise DimsterError(f"{source}: 'payload.file' cannot be a dimension (the base's file is read once)")
    for key in keys:
        if key.startswith(CLUSTER_PREFIX):
            check_cluster_key(key, source)
    return Campaign(file, source, path, base, list(_points(file, source, base)))


def _omb_points(file: CampaignFile, source: str, path: Path, notes: list[str]) -> list[Point]:
    """Each workload file (in the order of their names, as OMB runs them) with each driver file (in the
    order given), one point each, run as `dimster run -w W --driver D --set ...` runs them."""
    spec = file.omb
    assert spec is not None
    workloads = sorted((path.parent / w for w in spec.workloads), key=lambda w: w.stem)
    stems = [w.stem for w in workloads]
    if same := sorted({s for s in stems if stems.count(s) > 1}):
        raise DimsterError(f"{source}: two workloads named {same[0]}: OMB would run only the last")
    drivers: list[Path | None] = [path.parent / d for d in spec.drivers] or [None]
    sets = parse_set_arguments(spec.sets)
    points: list[Point] = []
    for workload_path in workloads:
        for driver in drivers:
            index = len(points) + 1
            values = {"workload": workload_path.stem, "driver": driver.stem if driver else "Kafka"}
            try:
                settings = [*sets, *_threshold_sets(file)]
                workload = load_workload(workload_path, settings, driver, omb_result=True, notes=notes)
            except DimsterError as e:
                raise DimsterError(f"{source}: point {index} ({label(values)}): {e}") from None
            named = workload.model_copy(update={"name": f"{file.name}-p{index}"})
            points.append(Point(index, 1, values, named))
    return points


def _threshold_sets(file: CampaignFile) -> list[tuple[str, str]]:
    """The campaign's thresholds as a --set on each OMB point."""
    if not file.thresholds:
        return []
    return [("thresholds", json.dumps([t.model_dump(by_alias=True) for t in file.thresholds]))]


def _points(file: CampaignFile, source: str, base: dict) -> list[Point]:
    """Every point in order, each repeat right after the other: the first dimension varies slowest,
    after the dimensions of `cluster.` keys, so that the points of one environment run together."""
    points = []
    dimensions = sorted(file.dimensions, key=lambda d: not any(k.startswith(CLUSTER_PREFIX) for k in d.names))
    rows = [list(zip(d.rows(), d.shown_rows(), strict=True)) for d in dimensions]
    names = [d.names for d in dimensions]
    for index, combination in enumerate(itertools.product(*rows), start=1):
        values: dict[str, Any] = {}
        shown: dict[str, Any] = {}
        for keys, (row, shown_row) in zip(names, combination, strict=True):
            values.update(zip(keys, row, strict=True))
            shown.update(zip(keys, shown_row, strict=True))
        environment = {k.removeprefix(CLUSTER_PREFIX): v for k, v in values.items() if k.startswith(CLUSTER_PREFIX)}
        workload_values = {k: v for k, v in values.items() if not k.startswith(CLUSTER_PREFIX)}
        workload = _point_workload(file, source, base, index, workload_values, where=label(shown) or "the base")
        points += [Point(index, r, shown, workload, environment) for r in range(1, file.repeat + 1)]
    return points


def _point_workload(file: CampaignFile, source: str, base: dict, index: int, values: dict, where: str) -> Workload:
    where = f"{source}: point {index} ({where})"
    try:
        data = apply_overrides(base, [(k, json.dumps(v)) for k, v in values.items()])
    except DimsterError as e:
        raise DimsterError(f"{where}: {str(e).removeprefix('--set ')}") from None
    data["name"] = f"{file.name}-p{index}"
    return parse_workload(data, where)


RUN_OVERHEAD_SECONDS = 15  # topics, workers, consumers joining, the close: what a run adds to its load


def estimated_seconds(workload: Workload) -> float:
    """A rough time for one run of the workload, for `--dry-run`."""
    return load_seconds(workload) + RUN_OVERHEAD_SECONDS
