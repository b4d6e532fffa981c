"""The control channel of a running workload: an HTTP API on loopback, guarded by a token kept in a
state file only the user can read (`<state dir>/runs/<env>.json`).

Requests that change the run (modify, stop, event) are handed to the coordinator's main loop through a
queue, so everything that changes the run happens on one thread. `GET /status` is answered by the HTTP
thread from the latest snapshot the main loop published (`publish_status`: every 0.25 s, and before it
answers a change), so that any number of status calls costs the run's loop nothing; only before the
first snapshot (the run still starting) does a status call wait for the loop, as the others do.
"""

import contextlib
import json
import os
import queue
import re
import secrets
import socketserver
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from dimster.coordinator.control.run_state import TOKEN_HEADER, read_run_state, run_state_file, write_run_state
from dimster.errors import DimsterError
from dimster.processes import TrackedProcess
from dimster.results.redaction import Redactor

MAX_BODY = 1_000_000  # bytes of a request body
# How often a server's loop looks for its shutdown: at socketserver's 0.5 s, the end of every run waited
# up to that long for each of its two servers (this API and the run's /metrics), before its summary.
SHUTDOWN_POLL_SECONDS = 0.05
Text = Annotated[StrictStr, Field(max_length=10_000)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmptyBody(_Body):
    pass


class ModifyBody(_Body):
    sets: list[tuple[Text, Text]] = Field(min_length=1, max_length=1000)  # (workload key, YAML value)
    by: Literal["control", "tune"] = "control"  # who asks: a user's command, or `dimster tune`


class EventBody(_Body):
    event: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z_]{0,60}$")]
    message: Text = ""
    action: Text | None = None  # a fault's
    node: StrictInt | None = None


# what each route accepts; anything else is answered 400 and never reaches the run
ROUTES: dict[tuple[str, str], tuple[str, type[_Body]]] = {
    ("GET", "/status"): ("status", EmptyBody),
    ("POST", "/modify"): ("modify", ModifyBody),
    ("POST", "/stop"): ("stop", EmptyBody),
    ("POST", "/event"): ("event", EventBody),
}


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    return f"{where}: {first['msg']}"


@dataclass
class ControlRequest:
    action: str  # status | modify | stop | event
    body: dict
    done: threading.Event = field(default_factory=threading.Event)
    status: int = 200
    answer: dict = field(default_factory=dict)

    def reply(self, answer: dict, status: int = 200) -> None:
        self.answer, self.status = answer, status
        self.done.set()


class Doorbell:
    """An eventfd the run loop waits on beside its workers' (`fd`): a request rings it, so that the loop
    takes the request at once, not when its wait for the workers ends (up to LOOP_TICK later)."""

    def __init__(self) -> None:
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._lock = threading.Lock()  # a late request's ring never writes to a closed (or reused) fd
        self._closed = False

    def ring(self) -> None:
        with self._lock:
            if not self._closed:
                os.eventfd_write(self.fd, 1)

    def answer(self) -> None:
        """Silence it (before the loop takes the requests: a ring after this wakes its next wait)."""
        with contextlib.suppress(BlockingIOError):  # not rung
            os.eventfd_read(self.fd)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self.fd)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # connections waiting to be accepted: socketserver's 5 drops a burst of callers' handshakes, and
    # those callers then wait for the kernel's retries (1, 3, 7 ... s) or for their time-out
    request_queue_size = 256


class ControlServer:
    """Serves the API until `close()`; the coordinator takes requests from `requests` and publishes its
    status with `publish_status`."""

    def __init__(self, env: str):
        self.env = env
        self.token = secrets.token_urlsafe(24)
        self.requests: queue.Queue[ControlRequest] = queue.Queue()
        self.redactor = Redactor()  # every answer goes through it; the run shares its bundle's
        self.http = _HTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.port = self.http.server_address[1]
        self.thread = serving_thread(self.http, "control-api")
        self.closed = False
        self.status_answer: bytes | None = None  # the latest status, encoded; replaced whole, never changed
        self.doorbell = Doorbell()  # rung with each request the run loop takes

    def publish_status(self, status: dict) -> None:
        """The run's status as `GET /status` answers it from now on (called by the main loop)."""
        self.status_answer = self.encode(status)

    def encode(self, answer: dict) -> bytes:
        return json.dumps(self.redactor.redact(answer), default=str).encode()  # `settings` holds secrets

    def start(self, details: dict) -> None:
        """Claim the environment: refuse when another live run holds it, then publish the state file."""
        existing = read_run_state(self.env)
        if existing is not None:
            raise DimsterError(
                f"a run is already active for '{self.env}' (run {existing['run_id']}, pid {existing['pid']}); "
                f"`dimster stop {self.env}` first"
            )
        self.thread.start()
        me = TrackedProcess.of(os.getpid())
        state = {"pid": me.pid, "started": me.started, "port": self.port, "token": self.token, **details}
        write_run_state(run_state_file(self.env), state)

    def update(self, **details: Any) -> None:
        path = run_state_file(self.env)
        write_run_state(path, {**json.loads(path.read_text()), **details})

    def close(self) -> None:
        """Release the environment and stop serving (once; later calls do nothing)."""
        if self.closed:
            return
        self.closed = True
        path = run_state_file(self.env)
        try:
            if json.loads(path.read_text()).get("token") == self.token:
                path.unlink()
        except (OSError, ValueError):
            pass
        if self.thread.is_alive():
            self.http.shutdown()
        self.http.server_close()
        self.doorbell.close()


def serving_thread(server: socketserver.BaseServer, name: str) -> threading.Thread:
    """A daemon thread (not yet started) that serves `server` until its shutdown()."""
    return threading.Thread(target=server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,), name=name, daemon=True)


def _handler_for(server: ControlServer):
    class Handler(BaseHTTPRequestHandler):
        timeout = 30  # seconds a request may take to arrive (a Content-Length larger than the body)

        def _serve(self, method: str) -> None:
            if not secrets.compare_digest(self.headers.get(TOKEN_HEADER, ""), server.token):
                return self._send(403, {"error": "bad token"})
            route = ROUTES.get((method, self.path))
            if route is None:
                allowed = [m for m, path in ROUTES if path == self.path]
                if allowed:
                    return self._send(405, {"error": f"{self.path} takes {', '.join(allowed)}, not {method[:20]}"})
                return self._send(404, {"error": f"no {method[:20]} {self.path[:100]}"})
            action, schema = route
            length = (self.headers.get("Content-Length") or "0").strip()
            if not re.fullmatch(r"[0-9]{1,9}", length) or int(length) > MAX_BODY:
                return self._send(400, {"error": f"bad Content-Length: {length[:40]!r}"})
            try:
                body = json.loads(self.rfile.read(int(length)) or b"{}")
            except ValueError:
                return self._send(400, {"error": "body is not JSON"})
            except TimeoutError:
                return self._send(408, {"error": f"the body did not arrive within {self.timeout} s"})
            if not isinstance(body, dict):
                return self._send(400, {"error": "body is not a JSON object"})
            try:
                body = schema.model_validate(body).model_dump(exclude_none=True)
            except ValidationError as e:
                return self._send(400, {"error": f"{action}: {_first_error(e)}"})
            snapshot = server.status_answer  # one read of the reference: a whole snapshot, whatever comes next
            if action == "status" and snapshot is not None:
                return self._send_encoded(200, snapshot)
            request = ControlRequest(action, body)
            server.requests.put(request)
            server.doorbell.ring()
            if not request.done.wait(600):
                return self._send(504, {"error": "the coordinator did not answer"})
            self._send(request.status, request.answer)

        def __getattr__(self, name: str):
            if name.startswith("do_"):  # every method gets an answer (405 or 404), not the server's 501
                return lambda: self._serve(name.removeprefix("do_"))
            raise AttributeError(name)

        def _send(self, status: int, answer: dict) -> None:
            self._send_encoded(status, server.encode(answer))

        def _send_encoded(self, status: int, data: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except ConnectionError:  # the caller gave up waiting: nothing to tell it
                pass

        def log_message(self, *_args) -> None:
            pass

    return Handler
