"""Who runs on an environment, and how to reach it: the run state file (`<state dir>/runs/<env>.json`,
readable by the user only: the control API's port and token) and the control API's client side, which
`status`, `wait`, `stop` and `run --modify` use. It imports little, so those commands start fast."""

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from dimster.clock import Deadline
from dimster.coordinator.control.conditions import holds, parse_condition
from dimster.errors import DimsterError
from dimster.paths import check_environment_name, state_dir
from dimster.processes import TrackedProcess

TOKEN_HEADER = "X-Dimster-Token"


class NoActiveRun(DimsterError):
    exit_code = 5


def run_state_file(env: str) -> Path:
    check_environment_name(env)
    return state_dir() / "runs" / f"{env}.json"


def console_log(env: str) -> Path:
    """Where a detached run of `env` writes its console (and, should it crash, its last words)."""
    return run_state_file(env).with_suffix(".console.log")


def write_run_state(path: Path, state: dict) -> None:
    """Atomically, readable by the user only: readers never see a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(state, f)
    tmp.replace(path)


def read_run_state(env: str) -> dict | None:
    """The state of the live run of `env`, or None (a state whose process is gone is removed)."""
    state, alive = _run_state(env)
    return state if alive else None


def _run_state(env: str) -> tuple[dict | None, bool]:
    """The run state file of `env` and whether its process lives. A state whose process is gone is
    removed; the run it names, when its run.json still says running, is marked crashed."""
    path = run_state_file(env)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, False
    try:
        alive = TrackedProcess(state["pid"], state["started"]).alive() and {"port", "token"} <= state.keys()
    except (KeyError, TypeError, ValueError, AttributeError):  # not a state of ours
        return None, False
    if not alive:
        path.unlink(missing_ok=True)
        from dimster.results.bundle import mark_crashed  # only for a run that crashed

        console = Path(state["console"]) if state.get("console") else None  # a detached run's
        crashed = bool(state.get("results")) and mark_crashed(Path(state["results"]), state["pid"], console)
        return (state if crashed else None), False  # a run that recorded its end left nothing to say
    return state, alive


def control_request(env: str, method: str, path: str, body: dict | None = None, timeout: float = 600) -> dict:
    """Call the API of the run of `env`; DimsterError with the coordinator's words on refusal."""
    state, alive = _run_state(env)
    if state is not None and not alive:
        from dimster.results.bundle import CRASHED_OUTPUT  # only for a run that crashed

        kept = Path(state["results"]) / "logs" / CRASHED_OUTPUT
        last_words = f"; its console output: {kept}" if kept.is_file() else ""
        raise NoActiveRun(
            f"the run of '{env}' crashed: its coordinator (pid {state['pid']}) ended without closing the run; "
            f"what it measured is in {state['results']} (`dimster summarize` it){last_words}"
        )
    if state is None:
        raise NoActiveRun(f"no run is active for '{env}' (start one with `dimster run {env} -w WORKLOAD.yaml`)")
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://127.0.0.1:{state['port']}{path}",
        data=data,
        method=method,
        headers={TOKEN_HEADER: state["token"], "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        try:
            message = json.loads(e.read()).get("error", str(e))
        except ValueError:
            message = str(e)
        raise DimsterError(message) from None
    except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError, ValueError) as e:
        raise NoActiveRun(f"the run of '{env}' does not answer on its control port: {e}") from None


def wait_until(env: str, until: str, timeout: float, every: float) -> tuple[bool, dict]:
    """Ask the run of `env` for its status every `every` seconds until condition `until` holds (True)
    or `timeout` seconds have passed (False); with the last status. `dimster wait` is this."""
    condition = parse_condition(until)
    deadline = Deadline(timeout)
    while True:
        status = control_request(env, "GET", "/status", timeout=30)
        if holds(condition, status):
            return True, status
        if deadline.passed():
            return False, status
        time.sleep(every)
