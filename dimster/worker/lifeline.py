"""A process that ends when the one that started it ends (Linux, `PR_SET_PDEATHSIG`).

The signal follows the starting *thread*: start such processes from the main thread."""

import contextlib
import ctypes
import os
import shutil
import signal
from pathlib import Path

PR_SET_PDEATHSIG = 1
# in the worker server's environment: its starter's PID, and the folder of the socket it listens on
SERVER_STARTER = "DIMSTER_WORKER_SERVER_STARTER"
SERVER_FOLDER = "DIMSTER_WORKER_SERVER_FOLDER"


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Linux: `signum` to this process when the one that started it ends."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signum)


def tie_worker_server() -> None:
    """The worker server's first import (worker/process.py, WORKER_PRELOAD): it ends with its starter,
    and its workers with it. A forked worker holds the server's own "alive" pipe open, so without this
    the server, and a worker busy elsewhere than its pipe, outlived a killed coordinator or agent. It
    takes its socket's folder with it, which its starter, killed, could not remove."""
    signal.signal(signal.SIGTERM, _end_server)
    die_with_parent(signal.SIGTERM)
    starter = os.environ.get(SERVER_STARTER, "")
    if starter.isdigit() and os.getppid() != int(starter):  # it ended before the signal was set
        _end_server(signal.SIGTERM, None)


def _end_server(_signum: int, _frame: object) -> None:
    folder = Path(os.environ.get(SERVER_FOLDER, ""))
    if folder.name.startswith("pymp-"):  # multiprocessing's own folder of the starter's, nothing else
        shutil.rmtree(folder, ignore_errors=True)
    os._exit(0)
