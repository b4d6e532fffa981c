"""The control channel of a run, fuzzed: whatever a caller sends, the answer is a 4xx or the request
reaches the run as one of the shapes the run understands; never a 5xx, never a half-understood change."""

import http.client
import json
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dimster.coordinator.control import ROUTES, TOKEN_HEADER, ControlServer

pytestmark = pytest.mark.unit

KEYS = ["sets", "event", "message", "node", "action", "producerRate", ""]


class Coordinator:
    """Stands for the run's main loop: takes each request that gets through, and keeps it."""

    def __init__(self, server: ControlServer):
        self.server = server
        self.seen: list[tuple[str, dict]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            request = self.server.requests.get()
            self.seen.append((request.action, request.body))
            request.reply({"ok": True})


@pytest.fixture(scope="module")
def api():
    server = ControlServer("control-fuzz-test")
    server.start({"run_id": "r", "results": None, "workload": "w", "phase": "running"})
    try:
        yield server, Coordinator(server)
    finally:
        server.close()


def call(server: ControlServer, method: str, path: str, body: bytes | None, token: str | None = None) -> tuple:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        headers = {TOKEN_HEADER: server.token if token is None else token}
        connection.request(method, path, body=body, headers=headers)
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)
bodies = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
    st.just(None),
)
paths = st.sampled_from([path for _, path in ROUTES] + ["/", "/status/", "/modify?x=1"]) | st.from_regex(
    r"/[a-z/]{0,16}", fullmatch=True
)


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "BREW"]), path=paths, body=bodies)
def test_any_request_is_answered_4xx_or_reaches_the_run_well_formed(api, method, path, body):
    server, coordinator = api
    before = len(coordinator.seen)
    status, answer = call(server, method, path, body)
    assert status in (200, 400, 404, 405), (status, answer)
    if status != 200:
        assert len(coordinator.seen) == before and "error" in answer  # the run never saw it
        return
    [(action, seen)] = coordinator.seen[before:]
    assert ROUTES[(method, path)][0] == action
    if action == "modify":
        assert seen["sets"] and all(isinstance(k, str) and isinstance(v, str) for k, v in seen["sets"])
    if action == "event":
        assert isinstance(seen["event"], str) and isinstance(seen.get("node", 0), int)


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        ("/modify", {"sets": "producerRate=5"}, "modify: sets: Input should be a valid list"),
        ("/modify", {"sets": [["producerRate", 5]]}, "modify: sets.0.1: Input should be a valid string"),
        ("/modify", {"sets": [["producerRate"]]}, "modify: sets.0.1: Field required"),
        ("/modify", {"sets": []}, "modify: sets: List should have at least 1 item"),
        ("/modify", {"set": [["producerRate", "5"]]}, "modify: sets: Field required"),
        ("/stop", {"now": True}, "stop: now: Extra inputs are not permitted"),
        ("/event", {"event": "fault", "node": "2"}, "event: node: Input should be a valid integer"),
        ("/event", {"event": "Not An Event"}, "event: event: String should match pattern"),
    ],
)
def test_wrong_shapes_are_named_and_change_nothing(api, path, body, error):
    server, coordinator = api
    before = len(coordinator.seen)
    status, answer = call(server, "POST", path, json.dumps(body).encode())
    assert status == 400 and answer["error"].startswith(error), answer
    assert len(coordinator.seen) == before


def test_a_wrong_token_changes_nothing(api):
    server, coordinator = api
    before = len(coordinator.seen)
    body = json.dumps({"sets": [["producerRate", "5"]]}).encode()
    assert call(server, "POST", "/modify", body, token=server.token[:-1] + "x")[0] == 403
    assert call(server, "POST", "/modify", body, token="")[0] == 403
    assert len(coordinator.seen) == before
    assert call(server, "POST", "/modify", body) == (200, {"ok": True})
    assert coordinator.seen[-1] == ("modify", {"sets": [("producerRate", "5")]})
