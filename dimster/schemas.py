"""JSON Schemas of the files dimster reads (a workload, an environment profile, a campaign) and
writes (run.json, summary.json, campaign.json, a campaign's summary.json, omb-result.json), generated
from their models: `python -m dimster.schemas` writes them to schemas/, `--check` names those that are
stale.

They are draft-07, the newest draft editors' YAML language server reads: definitions live under
`definitions`, and no keyword of a later draft appears. Where a model reads more than its fields
say (a `mode="before"` validator that writes out a short form such as `clientLibrary: java`), the
schema takes the short form too (SHORT_FORMS); an environment's top level picks its backend's
model by `backend` (absent: local), and a campaign's `base` is a file or a workload."""

import argparse
import json
import sys
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from dimster.campaign.model import CampaignFile
from dimster.cluster.backends import profile_models
from dimster.paths import PACKAGE_DIR
from dimster.results.campaign_records import CampaignJson, CampaignSummaryJson
from dimster.results.omb_records import OmbTestResult
from dimster.results.records import RunJson, SummaryJson
from dimster.workload.clients import Library, Version
from dimster.workload.model import Workload
from dimster.workload.modes import Mode
from dimster.workload.thresholds import Threshold

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
SCHEMAS_DIR = PACKAGE_DIR.parent / "schemas"
REF = "#/definitions/{model}"
DEFAULT_BACKEND = "local"  # a profile without `backend`

Schema = dict[str, Any]


def short_modes() -> list[str]:
    """The modes `mode: NAME` may name: those that need no setting."""
    names: list[str] = []
    for settings in typing.get_args(typing.get_args(Mode)[0]):
        if not any(field.is_required() for key, field in settings.model_fields.items() if key != "type"):
            names.append(*typing.get_args(settings.model_fields["type"].annotation))
    return names


# (model, key): the short form its mode="before" validator writes out in full; (model, None): the
# short form of the model itself, wherever it is
SHORT_FORMS: dict[tuple[type[BaseModel], str | None], Schema] = {
    (Workload, "mode"): {"type": "string", "enum": short_modes()},
    (Workload, "clientLibrary"): TypeAdapter(Library).json_schema(),
    (Workload, "clientVersion"): TypeAdapter(Version).json_schema(),
    (CampaignFile, "mode"): {"type": "string", "enum": short_modes()},
    (Threshold, None): {"type": "string", "description": "a threshold, as 'e2e.p99 < 50ms'"},
}


def generated(model: type[BaseModel]) -> tuple[Schema, Schema]:
    """A model's schema and its definitions, short forms taken."""
    schema = model.model_json_schema(by_alias=True, mode="validation", ref_template=REF)
    definitions = schema.pop("$defs", {})
    for (owner, key), short in SHORT_FORMS.items():
        if key is None:
            if owner.__name__ in definitions:
                definitions[owner.__name__] = taking(short, definitions[owner.__name__])
            continue
        target = schema if owner is model else definitions.get(owner.__name__)
        if target is not None and key in target["properties"]:
            target["properties"][key] = taking(short, target["properties"][key])
    return schema, definitions


def taking(short: Schema, full: Schema) -> Schema:
    """`full`, or its `short` form (title, description and default stay outside)."""
    kept: Schema = {k: full.pop(k) for k in ("title", "description", "default") if k in full}
    return {**kept, "anyOf": [short, full]}


def merged(definitions: Schema, more: Schema) -> Schema:
    """Two schemas' definitions as one; a name both have must mean the same."""
    for name, schema in more.items():
        if definitions.setdefault(name, schema) != schema:
            raise ValueError(f"two different definitions named {name}")
    return definitions


def document(schema: Schema, definitions: Schema) -> Schema:
    """A whole draft-07 schema: `$schema` first, `definitions` last, no OpenAPI `discriminator`."""
    whole = {"$schema": DRAFT_07, **schema, **({"definitions": definitions} if definitions else {})}
    return without_discriminators(whole)


def without_discriminators(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: without_discriminators(v) for k, v in schema.items() if k != "discriminator"}
    if isinstance(schema, list):
        return [without_discriminators(v) for v in schema]
    return schema


def workload_schema() -> Schema:
    return document(*generated(Workload))


def campaign_schema() -> Schema:
    """`base` is a workload file (relative to the campaign file) or a workload, its name optional
    (each point's is the campaign's name and the point's number)."""
    schema, definitions = generated(CampaignFile)
    workload, workload_definitions = generated(Workload)
    workload["required"] = [key for key in workload.get("required", []) if key != "name"]
    if not workload["required"]:
        del workload["required"]
    merged(definitions, {**workload_definitions, "BaseWorkload": {**workload, "title": "BaseWorkload"}})
    base = schema["properties"]["base"]
    schema["properties"]["base"] = {
        "title": base.get("title", "Base"),
        "anyOf": [{"type": "string", "description": "a workload file, relative to the campaign file"},
                  {"$ref": REF.format(model="BaseWorkload")}],
    }  # fmt: skip
    return document(schema, definitions)


def environment_schema() -> Schema:
    """The profile of the backend `backend` names: draft-07's if/then/else over the backends, the
    default backend's model when no other is named. A profile's `name` is its file's, never a key."""
    definitions: Schema = {}
    for model in profile_models().values():
        schema, more = generated(model)
        del schema["properties"]["name"]
        merged(definitions, {**more, model.__name__: schema})
    choice: Schema = {"$ref": REF.format(model=profile_models()[DEFAULT_BACKEND].__name__)}
    for backend, model in reversed(profile_models().items()):
        if backend != DEFAULT_BACKEND:
            named = {"properties": {"backend": {"const": backend}}, "required": ["backend"]}
            choice = {"if": named, "then": {"$ref": REF.format(model=model.__name__)}, "else": choice}
    top = {
        "title": "Environment",
        "description": "An environment profile (run/environments/NAME.yaml): the model of the backend it names.",
        "type": "object",
        "properties": {"backend": {"enum": list(profile_models()), "default": DEFAULT_BACKEND}},
        **choice,
    }
    return document(top, definitions)


def record_schema(record: Any) -> Schema:
    """A written file's schema, from its TypedDict (open to keys added later)."""
    schema = TypeAdapter(record).json_schema(ref_template=REF)
    return document(schema, schema.pop("$defs", {}))


def schemas() -> dict[str, Schema]:
    """Every schema by its file name in schemas/."""
    return {
        "workload.schema.json": workload_schema(),
        "environment.schema.json": environment_schema(),
        "campaign.schema.json": campaign_schema(),
        "run.schema.json": record_schema(RunJson),
        "summary.schema.json": record_schema(SummaryJson),
        "campaign-result.schema.json": record_schema(CampaignJson),
        "campaign-summary.schema.json": record_schema(CampaignSummaryJson),
        "omb-result.schema.json": record_schema(OmbTestResult),  # closed: OMB refuses unknown keys
    }


def rendered() -> dict[str, str]:
    return {name: json.dumps(schema, indent=2, ensure_ascii=False) + "\n" for name, schema in schemas().items()}


def stale(directory: Path) -> list[str]:
    """The files of `directory` that differ from the generated ones, are missing, or are not generated."""
    texts = rendered()
    on_disk = {p.name for p in directory.glob("*.schema.json")} if directory.is_dir() else set()
    differ = [n for n, text in texts.items() if not (directory / n).is_file() or (directory / n).read_text() != text]
    return sorted({*differ, *(on_disk - set(texts))})


def write(directory: Path) -> list[str]:
    """Write every schema to `directory`, removing those no longer generated; returns the names written."""
    directory.mkdir(exist_ok=True)
    texts = rendered()
    for path in directory.glob("*.schema.json"):
        if path.name not in texts:
            path.unlink()
    for name, text in texts.items():
        (directory / name).write_text(text)
    return list(texts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dimster.schemas", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1, naming them, when schemas/ files are stale")
    args = parser.parse_args(argv)
    if args.check:
        if found := stale(SCHEMAS_DIR):
            print(f"stale in schemas/: {', '.join(found)}: run python -m dimster.schemas", file=sys.stderr)
            return 1
        print("schemas/ is up to date")
        return 0
    print(f"wrote {len(write(SCHEMAS_DIR))} schemas to schemas/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
