"""A process that ends when the one that started it ends (Linux, `PR_SET_PDEATHSIG`).

The signal follows the starting *thread*: start such processes from the main thread."""

import contextlib
import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
SERVER_STARTER = "DIMSTER_WORKER_SERVER_STARTER"  # the worker server's starter's PID, in its environment


def die_with_parent() -> None:
    """Linux: SIGKILL this process when the one that started it ends."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def tie_worker_server() -> None:
    """The worker server's first import (worker/process.py, WORKER_PRELOAD): it ends with its starter,
    and its workers with it. A forked worker holds the server's own "alive" pipe open, so without this
    the server, and a worker busy elsewhere than its pipe, outlived a killed coordinator or agent."""
    die_with_parent()
    starter = os.environ.get(SERVER_STARTER, "")
    if starter.isdigit() and os.getppid() != int(starter):  # it ended before the signal was set
        os._exit(0)
