"""Each test's kind: exactly one of the markers MARKERS (test_markers), so that `scripts/test.sh -m
unit` (the fast loop) never starts Kafka, Spark or a browser unawares. Every session notes the kinds of
every test it collected, kept or deselected (KINDS), so that test_markers reads the whole suite's from
a session that collected it. Here, not in conftest.py: pytest imports conftest.py as a module of its
own, apart from the `tests.conftest` a test imports."""

import os

MARKERS = ("unit", "kafka", "spark", "browser")
KINDS: dict[str, list[str]] = {}  # node id -> its kind markers, of every test this session collected


def _note(items) -> None:
    for item in items:
        KINDS[item.nodeid] = [m for m in MARKERS if item.get_closest_marker(m)]


def pytest_deselected(items):
    _note(items)


def pytest_collection_finish(session):
    """With DIMSTER_LIST_KINDS set, every collected test is listed with its kind markers."""
    _note(session.items)
    if os.environ.get("DIMSTER_LIST_KINDS"):
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        for item in session.items:
            reporter.write_line(f"KINDS {item.nodeid} {','.join(KINDS[item.nodeid]) or '-'}")
