"""What more than one benchmark script needs: the dimster CLI as a subprocess, a block of free ports,
rounds of alternating cases, a percentile of a few measurements."""

import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DIMSTER = [sys.executable, "-m", "dimster"]


def free_block(size: int) -> int:
    """The first port of `size` consecutive free loopback ports from 24000 on."""
    for base in range(24000, 32000, size):
        try:
            for port in range(base, base + size):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    sys.exit("no free port block")


def dimster(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*DIMSTER, *args], cwd=ROOT, env=env, capture_output=True, text=True)


def percentile(values: list[float], share: float) -> float:
    """The value at `share` (0.99: p99) of `values`, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def alternating(cases: list, repeat: int, run_one: Callable[[Any], dict]) -> list[dict]:
    """`repeat` rounds, each running every case once in order (so that a slow stretch of the host falls
    on all cases alike): each run's row, with its round, printed as JSON as it comes."""
    rows = []
    for round_number in range(1, repeat + 1):
        for case in cases:
            row = {"round": round_number, **run_one(case)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows
