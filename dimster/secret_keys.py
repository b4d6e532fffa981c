"""Which keys name a secret, and how a secret's value shows: the rule under dimster's redaction
(results/redaction.py), kept at the bottom so that reading a file can mask a value in its errors."""

import functools
import re
from typing import Any

SECRET_KEY = re.compile(r"password|secret|jaas|token|credential|private|ssl\.key\.|\.key$", re.IGNORECASE)
MASK = "***"


def is_secret_key(key: Any) -> bool:
    return isinstance(key, str) and _names_secret(key)


@functools.lru_cache(maxsize=4096)  # the same keys come again in every status and record
def _names_secret(key: str) -> bool:
    return bool(SECRET_KEY.search(key))
