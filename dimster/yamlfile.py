"""Reading YAML files and turning validation failures into one line that names file and key."""

import difflib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

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
    errors = error.errors()
    first = errors[0]
    if first["type"] == "missing":  # a misspelt required key: name the misspelling, which suggests the key
        beside = [e for e in errors if e["type"] == "extra_forbidden" and e["loc"][:-1] == first["loc"][:-1]]
        first = beside[0] if beside else first
    loc = list(first["loc"])
    message = re.sub(r" or instance of \w+", "", first["msg"].removeprefix("Value error, "))  # a Python class
    if loc and loc[-1] in UNION_TAGS:  # a Kafka property: any scalar will do
        loc = [part for part in loc if part not in UNION_TAGS]
        message = "needs a single value (a number, word or boolean)"
    shown, _ = _walk(model, loc)
    key = ".".join(str(part) for part in shown)
    if first["type"] == "extra_forbidden":
        _, parent = _walk(model, loc[:-1])
        known = [f.alias or n for n, f in parent.model_fields.items()] if parent else []
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


def _walk(model: type[BaseModel], loc: list) -> tuple[list, type[BaseModel] | None]:
    """An error's location as the file writes it (without the tag pydantic adds for the member of a
    `type`-tagged union, `mode.steady.x` is `mode.x`), and the model at its end (None where unknown)."""
    shown: list = []
    members: list[type[BaseModel]] = [model]
    for part in loc:
        if isinstance(part, int):  # an index into a list of models
            shown.append(part)
            continue
        tagged = [m for m in members if _tag(m) == part]
        if len(members) > 1 and tagged:
            members = tagged
            continue
        shown.append(part)
        field = next((f for m in members for n, f in m.model_fields.items() if part in (n, f.alias)), None)
        members = _models_in(field.annotation) if field is not None else []
    return shown, members[0] if len(members) == 1 else None


def _tag(model: type[BaseModel]) -> str | None:
    """The value of a union member's `type: Literal[...]` field."""
    field = model.model_fields.get("type")
    args = get_args(field.annotation) if field is not None and get_origin(field.annotation) is Literal else ()
    return args[0] if len(args) == 1 and isinstance(args[0], str) else None


def _models_in(annotation) -> list[type[BaseModel]]:
    """The models inside `Model`, `Model | None`, `list[Model]` or a union of models."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]
