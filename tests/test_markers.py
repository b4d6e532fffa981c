"""Every test carries exactly one of the markers unit, kafka, spark, browser, so that
`scripts/test.sh -m unit` (the fast loop) never starts Kafka, Spark or a browser unawares."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import REPO
from tests.kinds import KINDS, MARKERS

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def kinds(request) -> dict[str, list[str]]:
    """Each test of the whole suite (node id) and its kind markers: this session's collection when it
    collected the whole suite (scripts/test.sh's tiers do, and deselect by marker), else one of its own."""
    paths = {Path(arg.split("::")[0]).resolve() for arg in request.config.args}
    if paths <= {REPO.resolve(), (REPO / "tests").resolve()} and not request.config.getoption("keyword"):
        return dict(KINDS)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DIMSTER_LIST_KINDS": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found = {}
    for line in result.stdout.splitlines():
        if line.startswith("KINDS "):
            node, names = line.removeprefix("KINDS ").rsplit(" ", 1)
            found[node] = [] if names == "-" else names.split(",")
    return found


def test_every_test_has_exactly_one_kind_marker(kinds):
    assert len(kinds) > 500
    unmarked = [node for node, names in kinds.items() if not names]
    assert unmarked == [], f"tests without any of {MARKERS}: {unmarked}"
    several = {node: names for node, names in kinds.items() if len(names) > 1}
    assert several == {}, f"tests with more than one of {MARKERS}: {several}"


def test_the_fast_loop_selects_tests(kinds):
    assert sum(names == ["unit"] for names in kinds.values()) > 100
