"""The CLI as the tests run it: a child process, as a user or a script would."""

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("dimster: error:")]


def dimster(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> CliResult:
    """Run the real CLI in a child process, as a user or script would."""
    result = subprocess.run(
        [sys.executable, "-m", "dimster", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )
    return CliResult(result.returncode, result.stdout, result.stderr)


def copy_project(scratch_project: Path, destination: Path) -> Path:
    """A copy of the session's scratch run/ (its ports, not the shipped ones) under `destination`."""
    shutil.copytree(scratch_project / "run", destination / "run")
    return destination
