"""Kubernetes objects checked against the OpenAPI v3 schema of their custom resource definition,
strictly: where the schema names an object's properties and does not preserve unknown fields, a
property it does not name is an error (the API server would drop it silently)."""

from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator

DATA = Path(__file__).parent / "data"


def strict(schema: Any) -> Any:
    """The schema with `additionalProperties: false` wherever it lists properties of an object that
    keeps no unknown fields, `nullable` as a null type, and int-or-string as either."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items() if key != "properties"}
    if "properties" in schema:
        out["properties"] = {name: strict(value) for name, value in schema["properties"].items()}
        if not schema.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in schema:
            out["additionalProperties"] = False
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def crd_validators(folder: str) -> dict[tuple[str, str], Draft7Validator]:
    """(apiVersion, kind) -> a strict validator, for each version of each definition in `folder`."""
    validators = {}
    for path in sorted((DATA / folder).glob("*.yaml")):
        crd = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)  # 400 kB: libyaml reads it 5x faster
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schema = strict(version["schema"]["openAPIV3Schema"])
            validators[(f"{group}/{version['name']}", kind)] = Draft7Validator(schema)
    return validators


def schema_errors(validators: dict[tuple[str, str], Draft7Validator], obj: dict) -> list[str]:
    """What the schema of `obj`'s apiVersion and kind finds wrong in it, each with its path."""
    validator = validators[(obj["apiVersion"], obj["kind"])]
    return [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator.iter_errors(obj)]
