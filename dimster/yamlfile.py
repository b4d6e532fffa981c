"""Reading YAML files and turning validation failures into one line that names file and key."""

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from dimster.errors import DimsterError
from dimster.paths import display


def load_mapping(path: Path, what: str) -> dict[str, Any]:
    """Load a YAML file whose top level must be a mapping (an empty file is an empty mapping)."""
    if not path.is_file():
        raise DimsterError(f"{what} file {display(path)} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise DimsterError(f"{display(path)}{where}: YAML syntax error: {e.problem}") from None
    except yaml.YAMLError as e:
        raise DimsterError(f"{display(path)}: YAML syntax error: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise DimsterError(f"{display(path)}: expected a mapping of keys to values at the top level")
    return data


def closest(name: str, candidates: Iterable[str]) -> str:
    """' (did you mean X?)' for the nearest candidate, or ''."""
    match = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""


def validation_error_line(source: str, error: ValidationError, model: type[BaseModel]) -> str:
    """The first pydantic error as `source: key 'a.b': message (got X)`, suggesting close keys."""
    first = error.errors()[0]
    key = ".".join(str(part) for part in first["loc"])
    if first["type"] == "extra_forbidden":
        known = _field_names(model, first["loc"][:-1])
        return f"{source}: unknown key '{key}'{closest(str(first['loc'][-1]), known)}"
    got = first.get("input")
    got_text = "" if isinstance(got, dict) or first["type"] == "missing" else f" (got {got!r})"
    return f"{source}: key '{key}': {first['msg']}{got_text}"


def _field_names(model: type[BaseModel], path: tuple) -> list[str]:
    """Aliases of the fields of the (nested) model at `path`, for 'did you mean'."""
    for part in path:
        field = model.model_fields.get(str(part)) or next(
            (f for f in model.model_fields.values() if f.alias == part), None
        )
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return [f.alias or n for n, f in model.model_fields.items()]
