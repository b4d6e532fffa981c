"""Where dimster finds its project files (run/), caches Kafka, and keeps cluster state."""

import os
import re
from pathlib import Path

from dimster.errors import DimsterError

PACKAGE_DIR = Path(__file__).resolve().parent


def project_dir() -> Path:
    """The folder holding `run/`: $DIMSTER_PROJECT_DIR, else the nearest parent of the working
    directory that has `run/environments`, else the checkout dimster is installed from."""
    if env := os.environ.get("DIMSTER_PROJECT_DIR"):
        return Path(env).resolve()
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "run" / "environments").is_dir():
            return folder
    return PACKAGE_DIR.parent


def environments_dir() -> Path:
    return project_dir() / "run" / "environments"


def cache_dir() -> Path:
    """Downloaded Kafka versions live here, outside any work tree."""
    if env := os.environ.get("DIMSTER_CACHE_DIR"):
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dimster"


def state_dir() -> Path:
    """Cluster data, process ids and run state; $DIMSTER_STATE_DIR moves it (tests do)."""
    if env := os.environ.get("DIMSTER_STATE_DIR"):
        return Path(env)
    return Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "dimster"


def display(path: Path) -> str:
    """A path as the user should read it: relative to the project when inside it."""
    try:
        return str(path.resolve().relative_to(project_dir()))
    except ValueError:
        return str(path)


ENVIRONMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_environment_name(env: str) -> None:
    """An environment is named, never a path: `../x` must not reach files outside their folders."""
    if not ENVIRONMENT_NAME.fullmatch(env):
        raise DimsterError(f"invalid environment name '{env}': letters, digits, '.', '_' and '-' only")
