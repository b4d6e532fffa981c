"""Deadlines on the monotonic clock (dimster/clock.py): a wall clock stepped back or forward moves
none of them; every wait of dimster's that has a time-out keeps it on this clock."""

import re
import time
from pathlib import Path

import pytest

from dimster import clock as clock_module
from dimster.clock import Deadline
from tests.held_clock import HeldClock

pytestmark = pytest.mark.unit

DIMSTER = Path(__file__).resolve().parents[1] / "dimster"
WALL_DEADLINE = re.compile(r"deadline\w*\s*=\s*.*time\.time\(\)|time\.time\(\)\s*[<>]=?\s*deadline")


def test_a_deadline_ignores_the_wall_clock_and_counts_down_to_zero(monkeypatch):
    """On a monotonic clock the test holds: a thread of the niced unit tier may wait longer for a CPU
    than any deadline a test can wait out."""
    held = HeldClock(now=1000.0)
    monkeypatch.setattr(clock_module, "time", held)
    deadline = Deadline(0.3)
    wall = time.time
    monkeypatch.setattr(held, "time", lambda: wall() + 3600)  # stepped an hour forward
    assert not deadline.passed() and deadline.left() == pytest.approx(0.3)
    monkeypatch.setattr(held, "time", lambda: wall() - 3600)  # and back
    assert not deadline.passed()
    held.now += 0.29
    assert not deadline.passed() and deadline.left() == pytest.approx(0.01)
    held.now += 0.02
    assert deadline.passed() and deadline.left() == 0.0


def test_no_deadline_is_reckoned_on_the_wall_clock():
    """A time-out computed as `time.time() + ...` and compared again with time.time() ends early or never
    when the clock is stepped; a shared time (the load's start, a record's timestamp) stays wall time."""
    found = []
    for path in sorted(DIMSTER.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"deadline\w*\s*=\s*.*time\.time\(\)", line) or re.search(
                r"time\.time\(\)\s*[<>]=?\s*deadline", line
            ):
                found.append(f"{path.relative_to(DIMSTER.parent)}:{number}: {line.strip()}")
    assert found == []
