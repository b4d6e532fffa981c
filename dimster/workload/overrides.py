"""`--set key=value` overrides: a dotted path into the workload document. Kafka property names keep
their dots: `kafkaConfig.producerConfig.batch.size` sets `batch.size` of `producerConfig`."""

import copy
from collections.abc import Iterable
from typing import Any

from dimster.errors import DimsterError

# Below these prefixes the rest of the path is one Kafka property name.
PROPERTY_SECTIONS = (
    "kafkaConfig.commonConfig",
    "kafkaConfig.producerConfig",
    "kafkaConfig.consumerConfig",
    "kafkaConfig.shareConsumerConfig",
    "kafkaConfig.topicConfig",
    "brokerConfig",
    "groupConfig",
)


def split_path(key: str) -> list[str]:
    for section in PROPERTY_SECTIONS:
        if key.startswith(section + "."):
            return [*section.split("."), key[len(section) + 1 :]]
    return key.split(".")


def parse_value(text: str) -> Any:
    """A value as YAML reads it: `60000` is a number, `true` a boolean, `{type: ONCE, ...}` a mapping."""
    import yaml  # here: `run --modify` only passes the text on, and starts faster without it

    from dimster import yamlcore

    try:
        return yamlcore.load(text) if text != "" else ""
    except yaml.YAMLError:
        return text


def parse_set_arguments(items: list[str]) -> list[tuple[str, str]]:
    """`k=v` items, and `k v` pairs as in `--set producerRate 60000`."""
    pairs: list[tuple[str, str]] = []
    pending: str | None = None
    for item in items:
        if pending is not None:
            pairs.append((pending, item))
            pending = None
        elif "=" in item:
            key, value = item.split("=", 1)
            pairs.append((key.strip(), value.strip()))
        else:
            pending = item
    if pending is not None:
        raise DimsterError(f"--set {pending}: needs a value, as `--set {pending}=VALUE` or `--set {pending} VALUE`")
    for key, _ in pairs:
        if not key or key.startswith(".") or key.endswith("."):
            raise DimsterError(
                f"--set '{key}': not a key path such as producerRate or kafkaConfig.producerConfig.linger.ms"
            )
    return pairs


def apply_overrides(data: dict, pairs: Iterable[tuple[str, str]]) -> dict:
    """A copy of `data` with every pair set (intermediate mappings created as needed); a `null`
    value removes the key, so it is back to its default."""
    result = copy.deepcopy(data)
    for key, text in pairs:
        parts = split_path(key)
        node = result
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise DimsterError(f"--set {key}: '{'.'.join(parts[: depth + 1])}' is a value, not a section")
            node = child
        value = parse_value(text)
        if value is None:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    return result
