"""How a run that ends badly ends: the exit codes of a failed run and of a failed correctness verdict,
and the stacks of a coordinator that dies of a fatal signal."""

import contextlib
import faulthandler
from collections.abc import Iterator
from pathlib import Path

from dimster.clients import jvm
from dimster.errors import DimsterError


class RunFailed(DimsterError):
    exit_code = 4


class CorrectnessFailed(RunFailed):
    """The run completed, and its records were not all delivered intact, in order, once."""

    exit_code = 7


@contextlib.contextmanager
def fatal_errors_logged(path: Path) -> Iterator[None]:
    """Python's fault handler on while the run goes: a fatal signal (a C library's abort or segfault)
    writes every thread's Python stack to `path` before the process dies, where the run's bundle keeps
    it. The file goes again when the run ends; one left empty says the process was killed outright.
    Off in a process that runs a JVM (checking Java client properties starts one), whoever turned it
    on (PYTHONFAULTHANDLER, a test runner): the JVM's own SIGSEGVs would go to the fault handler, and
    kill the process (clients/jvm.py, start_jvm)."""
    with path.open("w") as log:
        if jvm.running():
            faulthandler.disable()
        else:
            faulthandler.enable(log, all_threads=True)
        try:
            yield
        finally:
            faulthandler.disable()
    if not path.stat().st_size:
        path.unlink(missing_ok=True)
