"""What Kafka's Java clients said of a set of properties, kept on disk: the same properties judged by
the same kafka-clients version and dimster's Java classes get the same answer, so a `validate`, a
`run` or a live `--set` that asks again takes it from here instead of starting a JVM (about four
seconds of CPU). Properties that make a client read files or hold a secret (ssl.*, sasl.*, any
password) are always judged afresh, and nothing of them is written."""

import contextlib
import hashlib
import json
import os
import tempfile
from importlib import resources

from dimster.paths import cache_dir

FORMAT = 1  # raised when what is kept, or how it is judged on the Python side, changes
UNCACHED_PREFIXES = ("ssl.", "sasl.")

Verdict = tuple[str | None, str | None]  # (a commonConfig name none of the roles knows, a role's problem)


def cacheable(common: dict, sections: dict[str, dict]) -> bool:
    names = [*common, *(name for section in sections.values() for name in section)]
    return not any(name.startswith(UNCACHED_PREFIXES) or "password" in name for name in names)


def key(clients_version: str, roles: list[str], common: dict, sections: dict[str, dict]) -> str:
    """The roles' properties (commonConfig and their own sections), the kafka-clients version and the
    source of dimster's Java classes that judge them."""
    java = resources.files("dimster.kafka").joinpath("java")
    sources = "".join(f.read_text() for f in sorted(java.iterdir(), key=lambda f: f.name) if f.name.endswith(".java"))
    asked = {"format": FORMAT, "version": clients_version, "roles": roles, "common": common, "sections": sections}
    text = json.dumps(asked, sort_keys=True, default=str) + hashlib.sha256(sources.encode()).hexdigest()
    return hashlib.sha256(text.encode()).hexdigest()


def _path(name: str):
    return cache_dir() / "client-checks" / f"{name}.json"


def read(name: str) -> Verdict | None:
    try:
        common_problem, problem = json.loads(_path(name).read_text())
    except (OSError, ValueError, TypeError):
        return None
    return common_problem, problem


def write(name: str, verdict: Verdict) -> None:
    """Kept whole or not at all (several processes may judge the same properties at once)."""
    path = _path(name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
    except OSError:
        return  # a cache that cannot be written only costs the next check its JVM
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(list(verdict), out)
        os.replace(partial, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
