"""Shared fixtures: an isolated state folder for every test session, the CLI as a subprocess, and
the guarantee that no Kafka process of ours outlives the suite."""

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

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


def our_java_processes(state_dir: Path) -> list[psutil.Process]:
    """Java processes whose command line points into this session's state folder."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "java" in (process.info["name"] or "") and str(state_dir) in cmdline:
            found.append(process)
    return found


@pytest.fixture(scope="session", autouse=True)
def state_dir(tmp_path_factory) -> Path:
    """Cluster data and process ids of this test session live in a fresh folder; at the end no
    java process started from it may be left."""
    path = tmp_path_factory.mktemp("dimster-state")
    os.environ["DIMSTER_STATE_DIR"] = str(path)
    os.environ["DIMSTER_PROJECT_DIR"] = str(REPO)
    yield path
    leftovers = our_java_processes(path)
    for process in leftovers:
        process.kill()
    assert not leftovers, f"java processes left running after the suite: {[p.pid for p in leftovers]}"


@pytest.fixture
def project(tmp_path) -> Path:
    """A scratch copy of the project's run/ folder that a test may edit; DIMSTER_PROJECT_DIR points at it."""
    shutil.copytree(REPO / "run", tmp_path / "run")
    return tmp_path


def write_environment(project: Path, name: str, text: str) -> None:
    (project / "run" / "environments" / f"{name}.yaml").write_text(text)
