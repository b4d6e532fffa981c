"""Which keys name a secret, and how a secret's value shows: the rule under dimster's redaction
(results/redaction.py), kept at the bottom so that reading a file can mask a value in its errors."""

import re
from typing import Any

SECRET_KEY = re.compile(r"password|secret|jaas|token|credential|private|ssl\.key\.|\.key$", re.IGNORECASE)
MASK = "***"


def is_secret_key(key: Any) -> bool:
    return isinstance(key, str) and bool(SECRET_KEY.search(key))
