"""How a run that ends badly ends: the exit codes of a failed run and of a failed correctness verdict,
the stacks of a coordinator that dies of a fatal signal, and the tracebacks of its threads' bugs."""

import contextlib
import faulthandler
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from dimster.clients import jvm
from dimster.coordinator.account.self_cost import fewer_collections
from dimster.coordinator.control.run_log import stop_signals
from dimster.errors import DimsterError
from dimster.results.bundle import ResultsBundle


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


@contextlib.contextmanager
def thread_errors_logged(bundle: ResultsBundle) -> Iterator[None]:
    """While the run goes, a helper thread that dies of an exception (a bug: the threads catch what
    they expect) leaves its traceback in the bundle's logs/coordinator-errors.log and one line on
    stderr; Python's own hook (a traceback) only where the bundle cannot keep it."""
    before = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        line = None
        if args.exc_value is not None and not isinstance(args.exc_value, SystemExit):
            name = args.thread.name if args.thread else "a thread"
            with contextlib.suppress(OSError):  # the bundle cannot keep it: Python's own hook prints it
                line = f"dimster: thread {name} ended: {bundle.internal_error(f'thread {name}', args.exc_value)}"
        if line is None:
            before(args)
        else:
            sys.stderr.write(line + "\n")

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = before


@contextlib.contextmanager
def run_guards(bundle: ResultsBundle, on_signal: Callable) -> Iterator[None]:
    """What a run's length holds: its signal handler, fewer garbage collections, and its fatal errors'
    and threads' errors' logs."""
    with (
        stop_signals(on_signal),
        fewer_collections(),
        fatal_errors_logged(bundle.fatal_log),
        thread_errors_logged(bundle),
    ):
        yield
