"""A reader of dimster's output that goes away (`| head`, a `| tee` killed) ends the printing, not the
command: rich's console exits on a broken pipe, which ended a run between closing its workers and its
end account (run.json left `running`)."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

CHILD = """
import sys
from dimster.cli.output import console
console.print("a run's first line", markup=False)
console.print("its next status line", markup=False)
print("a plain print after them", flush=True)
with open(sys.argv[1], "w") as f:
    f.write("went on")
"""


def test_a_closed_pipe_ends_the_printing_not_the_command(tmp_path):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write meets a broken pipe
    marker = tmp_path / "marker"
    try:
        child = subprocess.run([sys.executable, "-c", CHILD, str(marker)], stdout=write, stderr=subprocess.PIPE,
                               text=True, timeout=120)  # fmt: skip
    finally:
        os.close(write)
    assert child.returncode == 0, child.stderr
    assert marker.read_text() == "went on"
    assert "Traceback" not in child.stderr and "Exception ignored" not in child.stderr, child.stderr
