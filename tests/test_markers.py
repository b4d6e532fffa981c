"""Every test carries exactly one of the markers unit, kafka, spark, browser, so that
`scripts/test.sh -m unit` (the fast loop) never starts Kafka, Spark or a browser unawares."""

import itertools
import subprocess
import sys

import pytest

from tests.conftest import MARKERS, REPO

pytestmark = pytest.mark.unit


def collected(expression: str) -> list[str]:
    """Node ids of the whole suite's tests that match the marker expression."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", expression, "tests"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode in (0, 5), result.stdout[-3000:] + result.stderr[-3000:]  # 5: none selected
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_every_test_has_exactly_one_kind_marker():
    unmarked = collected(" and ".join(f"not {m}" for m in MARKERS))
    assert unmarked == [], f"tests without any of {MARKERS}: {unmarked}"
    several = collected(" or ".join(f"({a} and {b})" for a, b in itertools.combinations(MARKERS, 2)))
    assert several == [], f"tests with more than one of {MARKERS}: {several}"


def test_the_fast_loop_selects_tests():
    assert len(collected("unit")) > 100
