"""Locks a test session holds until its process ends: a lock file under flock, so that two sessions at
once (two developers, the tiers of scripts/test.sh, the workers of a parallel tier) never share a
port block or the kept podman storage."""

import fcntl
from pathlib import Path

_held = []  # the open lock files: closing one would release its lock


def hold(path: Path) -> bool:
    """Take the lock of `path` for the rest of this process, if no other process holds it."""
    lock = open(path, "w")  # noqa: SIM115  (held until the process ends)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return False
    _held.append(lock)
    return True
