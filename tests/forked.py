"""Targets of processes the worker-server tests start (tests/test_worker_server.py): a process forked
from the server imports its target's module, so they live here, not in a test module."""

import os
import time
from multiprocessing.connection import Connection


def tell(connection: Connection) -> None:
    """What a started process finds: its parent, an environment value, and its folder."""
    connection.send((os.getppid(), os.environ.get("DIMSTER_TEST_STARTER"), os.getcwd()))
    connection.close()


def idle() -> None:
    """A worker busy elsewhere than its pipe (starting a JVM, fetching jars): it writes its server's
    PID and its own to $DIMSTER_TEST_TOLD, then sleeps."""
    told = os.environ["DIMSTER_TEST_TOLD"]
    with open(told + ".part", "w") as f:
        f.write(f"{os.getppid()} {os.getpid()}")
    os.rename(told + ".part", told)
    time.sleep(120)


def note() -> None:
    """Says it ran, in $DIMSTER_TEST_TOLD."""
    with open(os.environ["DIMSTER_TEST_TOLD"], "w") as f:
        f.write("the worker ran")
