"""Reading YAML files and turning validation failures into one line that names file and key."""

import difflib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from dimster import yamlcore
from dimster.errors import DimsterError
from dimster.paths import display
from dimster.secret_keys import MASK, is_secret_key


def load_mapping(path: Path, what: str) -> dict[str, Any]:
    """Load a YAML file whose top level must be a mapping (an empty file is an empty mapping)."""
    if not path.is_file():
        raise DimsterError(f"{what} file {display(path)} does not exist")
    try:
        data = yamlcore.load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        bad = f"byte {e.object[e.start]:#04x} at offset {e.start}"
        raise DimsterError(f"{display(path)}: not UTF-8 text ({bad})") from None
    except OSError as e:
        raise DimsterError(f"{display(path)}: cannot read the {what} file: {e.strerror}") from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise DimsterError(f"{display(path)}{where}: YAML syntax error: {e.problem}") from None
    except yaml.YAMLError as e:
        raise DimsterError(f"{display(path)}: YAML syntax error: {' '.join(str(e).split())}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise DimsterError(f"{display(path)}: expected a mapping of keys to values at the top level")
    return data


def closest(name: str, candidates: Iterable[str]) -> str:
    """' (did you mean X?)' for the nearest candidate, or ''."""
    match = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""


UNION_TAGS = {"str", "int", "float", "bool"}  # pydantic names the union member in an error's location


def validation_error_line(source: str, error: ValidationError, model: type[BaseModel]) -> str:
    """The first pydantic error as `source: key 'a.b': message (got X)`, suggesting close keys."""
    first = error.errors()[0]
    loc = list(first["loc"])
    message = re.sub(r" or instance of \w+", "", first["msg"].removeprefix("Value error, "))  # a Python class
    if loc and loc[-1] in UNION_TAGS:  # a Kafka property: any scalar will do
        loc = [part for part in loc if part not in UNION_TAGS]
        message = "needs a single value (a number, word or boolean)"
    key = ".".join(str(part) for part in loc)
    if first["type"] == "extra_forbidden":
        known = _field_names(model, tuple(loc[:-1]))
        return f"{source}: unknown key '{key}'{closest(str(loc[-1]), known)}"
    got = first.get("input")
    got_text = "" if isinstance(got, dict) or first["type"] == "missing" else f" (got {_as_written(got)})"
    if got_text and is_secret_key(key):  # the key and what is valid say enough; a secret is never echoed
        got_text = f" (got {MASK})"
    where = f"key '{key}': " if key else ""
    return f"{source}: {where}{message}{got_text}"


def _as_written(value: object) -> str:
    """A value as YAML or JSON would write it (null, true, ["a"]), not as Python's repr."""
    if isinstance(value, str):
        return repr(value)
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _nested_model(annotation) -> type[BaseModel] | None:
    """The model inside `Model`, `Model | None` or `list[Model]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _nested_model(arg)
        if found:
            return found
    return None


def _field_names(model: type[BaseModel], path: tuple) -> list[str]:
    """Aliases of the fields of the (nested) model at `path`, for 'did you mean'."""
    for part in path:
        if isinstance(part, int):  # an index into a list of models
            continue
        field = model.model_fields.get(str(part)) or next(
            (f for f in model.model_fields.values() if f.alias == part), None
        )
        nested = _nested_model(getattr(field, "annotation", None))
        if nested is None:
            return []
        model = nested
    return [f.alias or n for n, f in model.model_fields.items()]
