"""dimster/coordinator/ reads as its parts (docs/design.md, "The coordinator"): six packages, each
importing only the packages below it, and no module outside them. Read from the code's own import
statements, so an import against the order fails here before it makes a circle."""

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit

COORDINATOR = REPO / "dimster" / "coordinator"
# each package and the packages it may import (top first); control and workers import no other
ALLOWED = {
    "loop": {"live", "observers", "account", "control", "workers"},
    "live": {"observers", "account", "control", "workers"},
    "observers": {"account", "control", "workers"},
    "account": {"control", "workers"},
    "control": set(),
    "workers": set(),
}


def coordinator_imports(path: Path) -> set[str]:
    """The coordinator packages a module imports (`dimster.coordinator.PACKAGE...`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["dimster", "coordinator"] and len(parts) > 2:
                found.add(parts[2])
    return found


def test_every_module_of_the_coordinator_is_in_one_of_its_packages():
    loose = [p.name for p in COORDINATOR.glob("*.py") if p.name != "__init__.py"]
    packages = sorted(p.name for p in COORDINATOR.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert loose == [] and packages == sorted(ALLOWED), (loose, packages)


def test_each_package_imports_only_the_packages_below_it():
    against = []
    for package in ALLOWED:
        for module in sorted((COORDINATOR / package).glob("*.py")):
            for imported in coordinator_imports(module) - {package}:
                if imported not in ALLOWED[package]:
                    against.append(f"{package}/{module.name} imports {imported}")
    assert against == []


def test_the_check_sees_an_import_against_the_order(tmp_path):
    upward = tmp_path / "m.py"
    upward.write_text("from dimster.coordinator.loop.run import Coordinator\nimport dimster.coordinator.live.apply\n")
    assert coordinator_imports(upward) == {"loop", "live"}
