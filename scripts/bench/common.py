"""What more than one benchmark script needs: the dimster CLI as a subprocess, a block of free ports."""

import socket
import subprocess
import sys
from pathlib import Path

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
