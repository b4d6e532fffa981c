"""What `dimster tune` leaves behind: the workload with the tuner's changes, each commented with its
reason, ready for `dimster run -w`."""

from pathlib import Path

import yaml

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
