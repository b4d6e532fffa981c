"""docs/testing.md names, for each behaviour, the test that proves it now: every name must exist, so a
renamed or deleted test cannot leave a behaviour unproved without this failing."""

import re

import pytest

from tests.cli import REPO

pytestmark = pytest.mark.unit

TEST_NAME = re.compile(r"(test_\w+)::(test_\w+)")


def behaviour_rows() -> list[list[str]]:
    text = (REPO / "docs/testing.md").read_text()
    tables = text.split("## What each real-component test proves")[1].split("## Assertions changed")[0]
    rows = [line for line in tables.splitlines() if line.startswith("| ") and not line.startswith("| the behaviour")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_every_behaviour_names_a_test_that_exists_now():
    rows = behaviour_rows()
    assert len(rows) >= 100  # the tables were found
    for behaviour, before, now in rows:
        names = TEST_NAME.findall(now)
        if now.startswith("same"):
            names = TEST_NAME.findall(before)[:1] + names
        assert names, f"no test proves '{behaviour}' now"
        for module, function in names:
            path = REPO / "tests" / f"{module}.py"
            assert path.exists() and re.search(rf"^def {function}\(", path.read_text(), re.M), (
                f"docs/testing.md: '{behaviour}' names {module}::{function}, which does not exist"
            )
