"""A run's end imports nothing heavy: cli/run.py starts import_ahead() as the run starts, and the
summary's and report's libraries (pandas, PySpark's Connect client, plotly and its chart template) are
loaded on a thread at nice 10 before the run ends. Checked in a fresh interpreter, where none of them
is loaded yet."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

FRESH_PROCESS = """
import os, sys, threading
from dimster.cli import summary

heavy = ("pandas", "plotly", "pyspark.sql.connect.session", "dimster.report.html", "dimster.pipeline.summary")
assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]
niceness = {}
original = summary._import_end_of_run


def watched():
    original()
    niceness["thread"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    niceness["process"] = os.getpriority(os.PRIO_PROCESS, os.getpid())  # the main thread: the suite may run niced


summary._import_end_of_run = watched
summary.import_ahead()
for thread in summary._imports_ahead:
    thread.join(timeout=120)
assert [m for m in heavy if m not in sys.modules] == [], [m for m in heavy if m not in sys.modules]
import plotly.io
assert type(plotly.io.templates._templates["plotly_white"]).__name__ == "Template"  # loaded, not a placeholder
assert niceness["thread"] == min(19, niceness["process"] + 10), niceness
print("ok")
"""


def test_import_ahead_loads_the_end_of_runs_libraries_on_a_niced_thread():
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
