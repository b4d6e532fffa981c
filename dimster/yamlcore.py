"""YAML as a person means it: the numbers and booleans of YAML 1.2's core schema, so `010` is ten,
`1e6` a million, and `1:30`, `yes` and `2026-12-03` are words; and a key given twice in one mapping
is refused. PyYAML alone reads YAML 1.1, where `010` is eight, `1:30` is ninety and `1e6` a word.
Everything dimster reads and writes again (workloads, campaigns, profiles, `--set` values, a bundle's
copies) goes through `load` and `dump`."""

import re
from typing import Any

import yaml

INT = re.compile(r"^(?:[-+]?[0-9]+(?:_[0-9]+)*|0o[0-7]+|0x[0-9a-fA-F]+)$")  # digits grouped: `1_000_000`
FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
REPLACED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp"}


def _core_resolvers(cls: type[yaml.resolver.BaseResolver]) -> None:
    """Give `cls` (a Loader or a Dumper) YAML 1.2's implicit types instead of YAML 1.1's."""
    cls.yaml_implicit_resolvers = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag not in REPLACED]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    # int before float: an integer matches both patterns, and the first that matches is taken
    cls.add_implicit_resolver("tag:yaml.org,2002:int", INT, list("-+0123456789"))
    cls.add_implicit_resolver("tag:yaml.org,2002:float", FLOAT, list("-+.0123456789"))
    cls.add_implicit_resolver("tag:yaml.org,2002:bool", BOOL, list("tTfF"))


class Loader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if key in first_seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key '{key}' given twice (first on line {first_seen[key].line + 1})",
                    key_node.start_mark,
                )
            first_seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep)


def _int(loader: Loader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)  # a leading zero is a decimal's: `010` is ten (and int() takes `1_000`)


def _float(loader: Loader, node: yaml.ScalarNode) -> float:
    text = loader.construct_scalar(node).lower()
    if text.endswith(".inf"):
        return float(text.replace(".inf", "inf"))
    return float("nan") if text == ".nan" else float(text)


_core_resolvers(Loader)
Loader.add_constructor("tag:yaml.org,2002:int", _int)
Loader.add_constructor("tag:yaml.org,2002:float", _float)


class Dumper(yaml.SafeDumper):
    """Quotes a string that a YAML 1.2 reading would take for a number or a boolean (`1e6`, `0o17`)."""


_core_resolvers(Dumper)


def load(text: str) -> Any:
    return yaml.load(text, Loader=Loader)


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, allow_unicode=True)
