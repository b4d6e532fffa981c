"""scripts/suite_times.py: the suite's last lines name each tier's slowest tests and their share."""

import json
import sys

import pytest

from tests.cli import REPO

sys.path.insert(0, str(REPO / "scripts"))
import suite_times

pytestmark = pytest.mark.unit


def test_the_ten_slowest_come_first_with_their_share_of_the_tiers_test_time(tmp_path, capsys):
    seconds = {f"tests/test_{i}.py::t": float(i) for i in range(1, 13)}  # 78 s in all
    (tmp_path / "kafka.json").write_text(json.dumps(seconds))
    suite_times.main(str(tmp_path), "unit", "kafka")  # a tier that wrote nothing is left out
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "== slowest of tier kafka: 12 tests, 78 s of test time (on all its workers)"
    assert len(lines) == 11
    assert lines[1].split() == ["12.0", "s", "15.4%", "tests/test_12.py::t"]
    assert lines[-1].split()[-1] == "tests/test_3.py::t"
