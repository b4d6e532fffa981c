"""The registry of client libraries: every library it names is one module that provides the whole plug."""

import pytest

from dimster.client_libraries import LIBRARIES
from dimster.clients import LibraryPlug, library
from dimster.workload.clients import ClientLibrary

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", LIBRARIES)
def test_each_registered_library_provides_every_part_of_the_plug(name):
    plug = library(name)
    parts = [p for p in vars(LibraryPlug) if not p.startswith("_")] + list(LibraryPlug.__annotations__)
    assert set(parts) >= {"PRODUCER", "CONSUMER", "client_security", "check", "prepare_process"}
    assert [part for part in parts if not hasattr(plug, part)] == []


def test_the_workload_accepts_exactly_the_registered_names():
    assert ClientLibrary.model_json_schema()["properties"]["producer"]["enum"] == list(LIBRARIES)
