"""What `dimster tune` leaves behind: the workload with the tuner's changes, each commented with its
reason, ready for `dimster run -w`."""

from pathlib import Path

import yaml

from dimster.environment import EnvironmentProfile
from dimster.kafka.properties import property_text
from dimster.workload.model import long_forms
from dimster.workload.overrides import apply_overrides, split_path
from dimster.yamlfile import load_mapping


def tuned_workload_text(original: Path, changes: dict[str, int | str], reasons: dict[str, str]) -> str:
    """`original`'s workload with `changes` set (as `--set` sets them), a header naming each change and
    each changed key's line commented with its reason."""
    data = apply_overrides(long_forms(load_mapping(original, "workload")), [(k, str(v)) for k, v in changes.items()])
    lines = yaml.safe_dump(data, sort_keys=False, allow_unicode=True).splitlines()
    for key, reason in reasons.items():
        path = split_path(key)
        prefix = "  " * (len(path) - 1) + f"{path[-1]}:"
        at = next((i for i, line in enumerate(lines) if line.startswith(prefix)), None)
        if at is not None:
            lines[at] += f"  # tuned: {reason}"
    header = [f"# {original.name} as dimster tune left it: {len(changes)} change(s)"]
    header += [f"#   {key}: {value} ({reasons.get(key, '')})" for key, value in changes.items()]
    return "\n".join([*header, *lines]) + "\n"


def brokers_known(profile: EnvironmentProfile) -> tuple[Path | None, dict[str, str]]:
    """The brokers' config dimster knows of an environment: its broker-config file (None for an
    external cluster's, which dimster does not know) and the profile's overrides as Kafka's text."""
    overrides = {k: property_text(v) for k, v in profile.broker_overrides.items()}
    return (None if profile.backend == "external" else profile.broker_config_path), overrides


BROKER_PREFIX = "brokerConfig."
GROUP_PREFIX = "groupConfig."


def broker_settings(changes: dict[str, int | str]) -> dict[str, str]:
    """The brokers' properties that stand for the tuned changes: `brokerConfig.KEY` as KEY, and a share
    group's own `groupConfig.share.KEY` as the brokers' default for every share group, `group.share.KEY`."""
    found = {}
    for key, value in changes.items():
        if key.startswith(BROKER_PREFIX):
            found[key.removeprefix(BROKER_PREFIX)] = str(value)
        elif key.startswith(GROUP_PREFIX + "share."):
            found["group." + key.removeprefix(GROUP_PREFIX)] = str(value)
    return found


def tuned_broker_config_text(
    original: Path | None, overrides: dict[str, str], changes: dict[str, int | str], reasons: dict[str, str]
) -> str:
    """The brokers' config the tuned run asks for, as a file for run/broker-configs/: `original` (the
    environment's broker config, comments kept) with `overrides` (the workload's and environment's
    brokerConfig) and the tuned changes set, each tuned line commented with its reason."""
    lines = original.read_text().splitlines() if original is not None and original.is_file() else []
    tuned = broker_settings(changes)
    why = {name: reasons.get(key, "") for key in changes for name in broker_settings({key: changes[key]})}
    for name, value in {**overrides, **tuned}.items():
        line = f"{name}: {value}"
        if name in tuned:
            group = name.startswith("group.share.") and f"{GROUP_PREFIX}{name.removeprefix('group.')}" in changes
            scope = "; the group's own setting as every share group's default" if group else ""
            line += f"  # tuned: {why[name] or 'dimster tune'}{scope}"
        at = next((i for i, text in enumerate(lines) if text.split(":", 1)[0].strip() == name), None)
        if at is None:
            lines.append(line)
        else:
            lines[at] = line
    source = original.name if original is not None else "no broker config of dimster's (an external cluster)"
    header = [f"# the brokers' config of the tuned workload: {source} with {len(tuned)} tuned setting(s)"]
    header.append("# for run/broker-configs/: `dimster cluster redeploy ENV` applies it")
    return "\n".join([*header, *lines]) + "\n"
