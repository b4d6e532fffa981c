"""One redaction rule for everything dimster writes: results bundle, console, control API answers.

A key names a secret when SECRET_KEY matches it (`sasl.jaas.config`, `ssl.key.password`,
`kafkaConfig.commonConfig.sasl.password`, ...). Its value becomes `***` wherever the key shows: in
mappings, in change records (`{"key": <secret key>, "old": ..., "new": ...}`), in `key=value` text
and in command lines (`--set k=v`, `--set k v`). A Redactor also remembers the values it saw under
secret keys and masks them in any text (console lines, failure reasons, logs), so that a secret
given once stays out of every file.

A value dimster masked itself, so that values stay apart (a campaign's secret dimension shows its
values as `***1`, `***2` by their place in the campaign file), is a tag, and stays as it is.
"""

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dimster.secret_keys import MASK, SECRET_KEY, is_secret_key

__all__ = ["MASK", "SECRET_KEY", "Redactor", "is_secret_key", "redact", "redact_argv", "redact_text", "secret_tag"]

SECRET_TAG = re.compile(r"\*\*\*\d+")  # `***2`: the second value of a secret, masked by dimster
TAG_VALUE = re.compile(rf"{SECRET_TAG.pattern}[,;)]?")  # a tag as the value of `key=***2, ...`
CHANGE_VALUES = ("old", "new", "value")  # the fields of a change record whose `key` may name a secret
CONTAINERS = (dict, list, tuple)
PLAIN = (int, float, bool, type(None))  # values that hold no secret (their exact types: a str subclass is none)
SHAPES_KEPT = 10_000  # mappings' shapes remembered with the keys they hide ...
SHAPE_KEYS = 64  # ... of at most this many keys (a bound on the memory they take)
TEXTS_KEPT = 100_000  # masked texts remembered (a bound on the memory they take)
MIN_SECRET_LENGTH = 4  # shorter values are masked under their key, but not searched for in free text
KEY_AT_END = re.compile(r"[\w.\-]+$")  # the property name just before a `=`
CHANGE_LINE = re.compile(r"(?P<key>[\w.\-]+): .* -> .* \((?P<effect>[\w-]+)\)$")  # `k: old -> new (effect)`


def secret_tag(position: int) -> str:
    """How the `position`-th (1-based) value of a secret shows, apart from its other values."""
    return f"{MASK}{position}"


def _is_tag(value: Any) -> bool:
    return isinstance(value, str) and bool(SECRET_TAG.fullmatch(value))


def _mask(value: Any) -> Any:
    return value if _is_tag(value) else MASK


class Redactor:
    """Masks secrets; remembers the secret values it has seen, to mask them in free text too."""

    def __init__(self) -> None:
        self.secrets: set[str] = set()
        # names dimster made (the run's topics and groups, from the workload's name): never secret
        # keys, whatever words the name holds (a workload called "secrets" names its groups so)
        self.names: set[str] = set()
        # the texts masked so far (a run's status, published every 0.25 s, repeats the same strings for
        # every worker and client) and the secrets longest first; both start again with a new secret
        self._texts: dict[str, str] = {}
        self._by_length: list[str] = []
        # a mapping's keys (and whether it is a change record of a secret key) -> those it hides: a
        # status holds a row of the same keys for each of a thousand workers
        self._hidden: dict[tuple[tuple, bool], frozenset] = {}

    def add_names(self, names: Iterable[str]) -> None:
        """Names dimster made, never secret keys (see `names`)."""
        self.names.update(names)
        self._hidden.clear()

    def _secret_key(self, key: Any) -> bool:
        return key not in self.names and is_secret_key(key)

    def _hides(self, value: dict) -> frozenset:
        """The keys of `value` whose values are secret: secret keys, and a secret key's change's values."""
        change = "key" in value and is_secret_key(value["key"])
        # a mapping by names (clients, groups) would not come again in the same shape: not kept
        shape = (tuple(value), change) if len(value) <= SHAPE_KEYS else None
        hidden = self._hidden.get(shape) if shape else None
        if hidden is None:
            hidden = frozenset(k for k in value if self._secret_key(k) or (change and k in CHANGE_VALUES))
            if shape:
                if len(self._hidden) >= SHAPES_KEPT:
                    self._hidden.clear()
                self._hidden[shape] = hidden
        return hidden

    def learn(self, value: Any) -> None:
        """Remember the values under secret keys in `value` (mappings, change records, lists)."""
        if isinstance(value, dict):
            hidden = self._hides(value)
            for key, item in value.items():
                if key in hidden:
                    self._remember(item)
                elif isinstance(item, CONTAINERS):  # a plain value under a plain key holds no secret
                    self.learn(item)
        elif isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, CONTAINERS):
                    self.learn(item)

    def _remember(self, value: Any) -> None:
        if isinstance(value, dict | list | tuple):
            for item in value.values() if isinstance(value, dict) else value:
                self._remember(item)
            return
        text = "" if value is None or isinstance(value, bool) or _is_tag(value) else str(value).strip()
        if len(text) >= MIN_SECRET_LENGTH and text not in self.secrets:
            self.secrets.add(text)
            self._texts.clear()
            self._by_length = sorted(self.secrets, key=len, reverse=True)

    def redact(self, value: Any) -> Any:
        """A copy of `value` (mappings, lists, strings) with every secret masked; learns its secrets first."""
        self.learn(value)
        return self._masked(value)

    def _masked(self, value: Any) -> Any:
        if isinstance(value, dict):
            hidden = self._hides(value)
            return {
                key: _mask(item) if key in hidden else item if type(item) in PLAIN else self._masked(item)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [item if type(item) in PLAIN else self._masked(item) for item in value]
        if isinstance(value, str):
            text = self._texts.get(value)
            if text is None:
                if len(self._texts) >= TEXTS_KEPT:
                    self._texts.clear()
                text = self._texts[value] = self.text(value)
            return text
        return value

    def text(self, line: str) -> str:
        """`line` with the known secret values masked, the old and new value of a change line
        (`secret.key: old -> new (effect)`) and the value of every `secret.key=value`."""
        line = self._known(line)
        change = CHANGE_LINE.search(line)
        if change and is_secret_key(change["key"]):
            line = f"{line[: change.start()]}{change['key']}: {MASK} -> {MASK} ({change['effect']})"
        return "".join(_masked_assignment(token) for token in re.split(r"(\s+)", line))

    def argv(self, argv: list[str]) -> list[str]:
        """A command line with secrets masked: `k=v`, `--set=k=v` and the `--set k v` form."""
        out: list[str] = []
        in_sets = mask_next = False
        for arg in argv:
            if mask_next and not arg.startswith("-"):
                out.append(MASK)
                mask_next = False
                continue
            mask_next = False
            if arg.startswith("-"):
                in_sets = arg in ("--set", "-s")
            elif in_sets and "=" not in arg and is_secret_key(arg):
                mask_next = True
            out.append(_masked_assignment(self._known(arg)))
        return out

    def scrub_file(self, path: Path) -> None:
        """Mask the known secret values in a file written by others (worker and broker logs)."""
        if not self.secrets or not path.is_file():
            return
        data = original = path.read_bytes()
        for secret in self._longest_first():
            data = data.replace(secret.encode(), MASK.encode())
        if data != original:
            path.write_bytes(data)

    def _known(self, text: str) -> str:
        for secret in self._longest_first():
            text = text.replace(secret, MASK)
        return text

    def _longest_first(self) -> list[str]:
        return self._by_length


def _masked_assignment(token: str) -> str:
    """`sasl.password=x` → `sasl.password=***` (also inside `--set=...`); other tokens unchanged."""
    parts = token.split("=")
    for index, part in enumerate(parts[:-1]):
        name = KEY_AT_END.search(part)
        if name and is_secret_key(name.group()) and not (index == len(parts) - 2 and TAG_VALUE.fullmatch(parts[-1])):
            return "=".join(parts[: index + 1]) + "=" + MASK
    return token


def redact(value: Any) -> Any:
    """A copy of `value` with every secret masked (the values seen in `value` itself included)."""
    return Redactor().redact(value)


def redact_argv(argv: list[str]) -> list[str]:
    return Redactor().argv(argv)


def redact_text(line: str) -> str:
    """A line with the value of every `secret.key=value` masked (no remembered values)."""
    return Redactor().text(line)
