"""A campaign file: one `base` workload run at every point of its `dimensions` (one key, or several
keys that co-vary; several dimensions make a cartesian product), each point `repeat` times, in the
test `mode` it names. Every point is a complete workload, validated before anything runs."""

import datetime
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from dimster.errors import DimsterError
from dimster.paths import display
from dimster.workload.model import Strict, Workload, long_forms, parse_workload
from dimster.workload.modes import Mode, load_seconds, mode_mapping
from dimster.workload.overrides import PROPERTY_SECTIONS, apply_overrides
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
            for value in self.values:
                if not isinstance(value, list) or len(value) != len(self.keys):
                    raise ValueError(
                        f"each value of keys {self.keys} is a list of {len(self.keys)} values, got {value!r}"
                    )
        for value in self.values:
            if date := _first_date(value):
                names = ", ".join(self.names)
                raise ValueError(
                    f"value {date} of dimension '{names}' is a date to YAML: quote it ('{date}') to mean the text"
                )
        return self

    @property
    def names(self) -> list[str]:
        if self.keys is not None:
            return self.keys
        assert self.key is not None  # the validator: a dimension names either key or keys
        return [self.key]

    def rows(self) -> list[list[Any]]:
        """Its values, one list (a value per key) each."""
        return self.values if self.keys is not None else [[v] for v in self.values]


def _first_date(value: Any) -> str | None:
    """A date or time YAML made of an unquoted value (2026-01-01), as written; a point's values are JSON."""
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return next((d for v in value if (d := _first_date(v))), None)
    if isinstance(value, dict):
        return next((d for v in value.values() if (d := _first_date(v))), None)
    return None


class CampaignFile(Strict):
    name: str = Field(..., pattern=r"^[A-Za-z0-9._-]{1,60}$")
    base: str | dict[str, Any]  # a workload file (relative to the campaign file) or the workload itself
    dimensions: list[Dimension] = Field(default_factory=list)
    repeat: int = Field(1, ge=1, le=100)
    mode: Mode | None = None  # overrides the base workload's

    @model_validator(mode="before")
    @classmethod
    def _mode_name(cls, data):
        if isinstance(data, dict) and "mode" in data:
            data = {**data, "mode": mode_mapping(data["mode"])}
        return data


@dataclass
class Point:
    index: int  # 1-based, shared by the repeats of one point
    repeat: int  # 1..repeat
    values: dict[str, Any]  # key -> value, every dimension's keys
    workload: Workload

    @property
    def label(self) -> str:
        return ", ".join(f"{short_key(k)}={v}" for k, v in self.values.items())

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

    def resolved(self) -> dict[str, Any]:
        """The campaign with its base inlined: what a resumed campaign runs, whatever became of the files."""
        return {**self.file.model_dump(by_alias=True, exclude_none=True), "base": self.base}


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
    base = long_forms(
        load_mapping(path.parent / file.base, f"{source}: base workload") if isinstance(file.base, str) else file.base
    )
    if file.mode is not None:
        base["mode"] = file.mode.model_dump(by_alias=True)
    keys = [k for d in file.dimensions for k in d.names]
    if duplicated := sorted({k for k in keys if keys.count(k) > 1}):
        raise DimsterError(f"{source}: key '{duplicated[0]}' is in more than one dimension")
    if "name" in keys or "mode" in keys or any(k.startswith("mode.") for k in keys):
        raise DimsterError(f"{source}: 'name' and 'mode' cannot be dimensions (a campaign has one mode)")
    return Campaign(file, source, path, base, list(_points(file, source, base)))


def _points(file: CampaignFile, source: str, base: dict) -> list[Point]:
    """Every point in order (the first dimension varies slowest), each repeat right after the other."""
    points = []
    rows = [d.rows() for d in file.dimensions]
    names = [d.names for d in file.dimensions]
    for index, combination in enumerate(itertools.product(*rows), start=1):
        values = {k: v for keys, row in zip(names, combination, strict=True) for k, v in zip(keys, row, strict=True)}
        workload = _point_workload(file, source, base, index, values)
        points += [Point(index, r, values, workload) for r in range(1, file.repeat + 1)]
    return points


def _point_workload(file: CampaignFile, source: str, base: dict, index: int, values: dict) -> Workload:
    where = f"{source}: point {index} ({', '.join(f'{k}={v}' for k, v in values.items()) or 'the base'})"
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
