"""stop_and_remove against containers of our own making: a removal the daemon refuses is tried again,
and what it still keeps is said, never counted as removed (a podman under load kept three node
containers that `cluster down` had reported removed, and `--purge` then found their volumes in use)."""

import docker.errors
import pytest

from dimster.containers import daemon
from dimster.errors import DimsterError

pytestmark = pytest.mark.unit


class Container:
    """A container whose daemon refuses its removal `refusals` times (None: always)."""

    def __init__(self, name: str, refusals: int | None = 0, gone: bool = False, unheeded: int = 0):
        self.name, self.refusals, self.gone = name, refusals, gone
        self.unheeded = unheeded  # removals the daemon answers yes to but does not do
        self.stops, self.removals = 0, 0
        self.removed = False

    def stop(self, timeout: float) -> None:
        self.stops += 1

    def remove(self, force: bool, v: bool) -> None:
        assert force and v
        self.removals += 1
        if self.gone:
            raise docker.errors.NotFound("no such container")
        if self.refusals is None or self.removals <= self.refusals:
            raise docker.errors.APIError("500", explanation=f"{self.name} is being cleaned up\nmore")
        self.removed = self.removals > self.unheeded

    def reload(self) -> None:
        if self.removed or self.gone:
            raise docker.errors.NotFound("no such container")


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    monkeypatch.setattr(daemon, "REMOVE_PAUSE", 0.0)


def test_a_refused_removal_is_tried_again_until_the_daemon_takes_it():
    first, second = Container("node-1"), Container("node-2", refusals=2)
    assert daemon.stop_and_remove([first, second], 5) == []
    assert (first.stops, first.removals, first.removed) == (1, 1, True)
    assert (second.stops, second.removals, second.removed) == (1, 3, True)


def test_a_removal_the_daemon_answered_but_did_not_do_is_done_again():
    container = Container("node-5", unheeded=1)
    assert daemon.stop_and_remove([container], 5) == []
    assert (container.removals, container.removed) == (2, True)
    stubborn = Container("node-6", unheeded=daemon.REMOVE_TRIES)
    assert daemon.stop_and_remove([stubborn], 5) == ["node-6: still there after its removal"]


def test_what_the_daemon_keeps_is_returned_with_its_reason_and_fails_the_caller():
    kept, gone = Container("node-3", refusals=None), Container("node-4", gone=True)
    left = daemon.stop_and_remove([kept, gone], 5)
    assert left == ["node-3: node-3 is being cleaned up"]
    assert kept.removals == daemon.REMOVE_TRIES and gone.removals == 1  # one already gone is removed
    with pytest.raises(DimsterError, match=r"did not remove the nodes: node-3: node-3 is being cleaned up$"):
        daemon.removed_or_fail(left, "the nodes")
    daemon.removed_or_fail([], "the nodes")  # nothing kept: no error
