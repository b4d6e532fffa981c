"""The scripts of scripts/bench as modules, for the tests that check them: they import each other by
name, as when run as scripts, so their folder goes on the path."""

import importlib
import sys
from types import ModuleType

from tests.cli import REPO

BENCH = REPO / "scripts" / "bench"


def bench_script(name: str) -> ModuleType:
    """scripts/bench/`name`.py, imported once."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)
