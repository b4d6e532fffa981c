"""The control channel of a run, fuzzed: whatever a caller sends, the answer is a 4xx, the run's
latest status, or the request reaches the run as one of the shapes the run understands; never a 5xx,
never a half-understood change. And bursts of status calls: all answered, the run unharmed."""

import http.client
import itertools
import json
import re
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dimster.coordinator.control.api import ROUTES, ControlServer
from dimster.coordinator.control.desk import ControlDesk
from dimster.coordinator.control.run_state import TOKEN_HEADER, read_run_state
from dimster.coordinator.workers.local import LocalWorkers
from tests.conftest import REPO, dimster
from tests.runs import only_bundle, run_info, write_workload

KEYS = ["sets", "by", "event", "message", "node", "action", "producerRate", ""]
STATUS = {"runId": "r", "phase": "measure", "sent": 0, "settings": {"sasl.password": "hunter22"}}


class Coordinator:
    """Stands for the run's main loop: publishes a status, takes each request that gets through, and
    keeps it."""

    def __init__(self, server: ControlServer):
        self.server = server
        self.seen: list[tuple[str, dict]] = []
        server.publish_status(STATUS)
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


@pytest.mark.unit
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
    if ROUTES[(method, path)][0] == "status":  # from the published snapshot: the run's loop is not asked
        assert coordinator.seen[before:] == [] and answer == {**STATUS, "settings": {"sasl.password": "***"}}
        return
    [(action, seen)] = coordinator.seen[before:]
    assert ROUTES[(method, path)][0] == action
    if action == "modify":
        assert seen["sets"] and all(isinstance(k, str) and isinstance(v, str) for k, v in seen["sets"])
        assert seen["by"] in ("control", "tune")
    if action == "event":
        assert isinstance(seen["event"], str) and isinstance(seen.get("node", 0), int)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        ("/modify", {"sets": "producerRate=5"}, "modify: sets: Input should be a valid list"),
        ("/modify", {"sets": [["producerRate", 5]]}, "modify: sets.0.1: Input should be a valid string"),
        ("/modify", {"sets": [["producerRate"]]}, "modify: sets.0.1: Field required"),
        ("/modify", {"sets": []}, "modify: sets: List should have at least 1 item"),
        ("/modify", {"set": [["producerRate", "5"]]}, "modify: sets: Field required"),
        ("/modify", {"sets": [["producerRate", "5"]], "by": "me"}, "modify: by: Input should be 'control' or 'tune'"),
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


@pytest.mark.unit
def test_a_wrong_token_changes_nothing(api):
    server, coordinator = api
    before = len(coordinator.seen)
    body = json.dumps({"sets": [["producerRate", "5"]]}).encode()
    last = "y" if server.token.endswith("x") else "x"
    assert call(server, "POST", "/modify", body, token=server.token[:-1] + last)[0] == 403
    assert call(server, "POST", "/modify", body, token="")[0] == 403
    assert len(coordinator.seen) == before
    assert call(server, "POST", "/modify", body) == (200, {"ok": True})
    assert coordinator.seen[-1] == ("modify", {"sets": [("producerRate", "5")], "by": "control"})


def burst(port: int, token: str, calls: int = 100) -> list[dict]:
    """`calls` GET /status at once, each on its own connection, as `dimster status` makes them; each
    answer with the code, and when the call went out and its answer came back (time.monotonic())."""
    barrier = threading.Barrier(calls)
    answers: list[dict] = []

    def one() -> None:
        barrier.wait()
        asked = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            connection.request("GET", "/status", headers={TOKEN_HEADER: token})
            response = connection.getresponse()
            answer = {"code": response.status, **json.loads(response.read())}
        except (OSError, http.client.HTTPException) as e:
            answer = {"code": 0, "error": repr(e)}
        finally:
            connection.close()
        answers.append({**answer, "asked": asked, "arrived": time.monotonic()})

    threads = [threading.Thread(target=one) for _ in range(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def assert_in_order(answers: list[dict]) -> None:
    """`sent` never goes back: an answer shows at least what every answer that came back before it was
    asked for showed (answers to calls in flight together may come back in either order)."""
    by_arrival = sorted(answers, key=lambda a: a["arrived"])
    for answer in answers:
        earlier = [a["sent"] for a in by_arrival if a["arrived"] < answer["asked"]]
        assert answer["sent"] >= max(earlier, default=0), answer


@pytest.mark.unit
def test_a_burst_of_status_calls_is_answered_from_the_snapshot_while_it_changes():
    """100 connections at once are all accepted (a listen backlog of 5 left some callers waiting for
    the kernel's retries, or for ever), and each gets one whole published status, never the run's loop."""
    server = ControlServer("control-burst-test")
    server.start({"run_id": "r", "results": None, "workload": "w", "phase": "running"})
    published, ended = threading.Event(), threading.Event()

    def main_loop() -> None:
        for sent in itertools.count(1):
            server.publish_status({**STATUS, "sent": sent, "acked": sent})
            published.set()
            if ended.wait(0.001):
                return

    threading.Thread(target=main_loop, daemon=True).start()
    try:
        assert published.wait(120)  # a thread of the niced unit tier may wait seconds for a CPU
        assert server.http.request_queue_size >= 100  # the kernel queues the whole burst's handshakes
        answers = burst(server.port, server.token)
        assert [a["code"] for a in answers] == [200] * 100, [a for a in answers if a["code"] != 200][:3]
        assert all(a["runId"] == "r" and a["acked"] == a["sent"] > 0 for a in answers)
        assert all(a["settings"] == {"sasl.password": "***"} for a in answers)
        assert server.requests.empty()
        assert_in_order(answers)
    finally:
        ended.set()
        server.close()


@pytest.mark.unit
def test_a_request_wakes_the_loops_wait_for_its_workers_at_once(tmp_path):
    """The run loop waits on its workers' pipes and the control API's doorbell: a --modify is taken as
    it arrives, not when the wait ends (LOOP_TICK). Here the wait is 60 s; the request must not need it."""
    server = ControlServer("control-doorbell-test")
    server.start({"run_id": "r", "results": None, "workload": "w", "phase": "running"})
    desk = ControlDesk(server, lambda: STATUS, None)  # type: ignore[arg-type]  # no log: nothing fails here
    workers = LocalWorkers(tmp_path)  # none: what wakes the wait is the point
    answers: list = []
    try:
        asking = threading.Thread(
            target=lambda: answers.append(call(server, "POST", "/modify", b'{"sets": [["producerRate", "9"]]}'))
        )
        asking.start()
        begun = time.monotonic()
        assert workers.receive(60, desk.doorbell) == []
        woke_after = time.monotonic() - begun
        desk.serve(lambda sets, by: {"applied": sets, "by": by}, dict)
        asking.join(30)
        assert answers == [(200, {"applied": [["producerRate", "9"]], "by": "control"})]
        assert woke_after < 30  # a wait of 60 s ended by the request (it rang within a second of starting)
        begun = time.monotonic()
        assert workers.receive(0.3, desk.doorbell) == []  # answered: the bell is silent again
        assert time.monotonic() - begun >= 0.29
    finally:
        server.close()


@pytest.fixture
def no_run_afterwards():
    yield
    dimster("stop", "local")


# console.status_line: "[    12s/60s measure] pub ..." (of 60 planned)
STATUS_LINE = re.compile(r"^\[\s*(\d+)s(?:/\d+s)? (\w+)\s*\]")


@pytest.mark.kafka
def test_a_burst_of_status_calls_during_a_run_is_answered_and_the_run_goes_on(tmp_path, no_run_afterwards):
    """Issue 17, without clocks: durations are the benchmark's (scripts/bench/status_burst.py)."""
    workload = write_workload(tmp_path, "status-burst", durationSeconds=6, reportIntervalSeconds=1)
    command = ["run", "local", "-w", str(workload), "--results", str(tmp_path / "results"), "--no-summary"]
    process = subprocess.Popen(
        [sys.executable, "-m", "dimster", *command], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 180  # a cold cluster starts first
        while (state := read_run_state("local")) is None or state.get("phase") != "running":
            assert process.poll() is None and time.monotonic() < deadline, "the run did not start its load"
            time.sleep(0.2)
        assert state["console"] is None  # a foreground run's console is its terminal: nothing to keep
        while (before := burst(state["port"], state["token"], 1)[0])["sent"] == 0:  # no CLI: early in the load
            assert time.monotonic() < deadline, before
            time.sleep(0.2)
        answers = burst(state["port"], state["token"])
        after = burst(state["port"], state["token"], 1)[0]
        out, err = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err + out
    assert [a["code"] for a in answers] == [200] * 100, [a for a in answers if a["code"] != 200][:3]
    assert {a["runId"] for a in answers} == {before["runId"]} == set(re.findall(r"^run (\S+): \d+ producer", out, re.M))
    assert all(before["sent"] <= a["sent"] <= after["sent"] and a["acked"] <= a["sent"] for a in answers)
    assert_in_order(answers)
    burst_at = max(a["elapsedSeconds"] for a in answers)
    lines = [m for m in map(STATUS_LINE.match, out.splitlines()) if m]
    assert [m[0] for m in lines if m[2] == "measure" and int(m[1]) > burst_at + 1], out  # the run went on
    assert "run completed" in out and run_info(only_bundle(tmp_path / "results"))["totals"]["lost"] == 0, out
