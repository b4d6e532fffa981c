"""`dimster worker serve`: a long-lived agent that runs the clients a coordinator places on it.

The agent speaks the protocol on a ZeroMQ ROUTER socket. It serves one run at a time: the coordinator
that said Hello first owns it until its workers close, its connection closes (a killed coordinator's
kernel closes it at once; ZeroMQ's heartbeats close a silent one) or it falls silent; any other is
refused. For
each run it starts up to `slots` worker processes (`--workers N`; the same `worker_main` a local run
uses, forked from one server process that imported its code once), one per Assign, and relays
messages between them and the coordinator: a worker's message travels as two frames, its worker index
and the message; one frame is the agent's own (Hello, Welcome, clock probes, SetClock, Assign, and
its workers' reports of an interval merged into one, report_hold.py), or, from the coordinator, for
every worker of the run (Close, Update). It
answers clock probes itself, with this host's clock. When a worker closes it ships that worker's log
files back before it says Closed. Client properties of the run that
load code, run a command or name a file or URL on this host are refused unless the agent's operator
allows them (remote/allowances.py), in the Assign and in every live Update.
"""

import contextlib
import logging
import math
import os
import platform
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path

import psutil
import zmq
from pydantic import ValidationError
from zmq.utils.monitor import recv_monitor_message

from dimster import __version__
from dimster.clock import Deadline
from dimster.errors import DimsterError
from dimster.remote.allowances import Allowances
from dimster.remote.report_hold import ReportHold
from dimster.remote.security import serve_securely
from dimster.worker.process import PipeChannel, start_worker, start_worker_server
from dimster.worker.protocol import (
    PROTOCOL_VERSION,
    Assign,
    ClockProbed,
    Close,
    Failed,
    Hello,
    LogFileSent,
    Message,
    ProbeClock,
    ProtocolError,
    Refused,
    Reported,
    SetClock,
    Update,
    Welcome,
    decode,
    encode,
    framed_worker,
    kind_of,
    worker_frame,
)
from dimster.workload.model import Workload
from dimster.yamlfile import validation_error_line

log = logging.getLogger("dimster.agent")
COORDINATOR_TIMEOUT = 30.0  # a run whose coordinator is silent this long is ended (it probes every second)
HEARTBEAT_MS = 2000  # ZeroMQ pings each connection this often (its I/O thread answers, not the loop's)
HEARTBEAT_TIMEOUT_MS = 10_000  # a connection that answers no ping this long is closed, ending its run
MAX_LOG_BYTES = 50 * 2**20  # per file shipped back
MAX_MESSAGE_BYTES = 16 * 2**20  # from a coordinator (an Assign of thousands of clients is far smaller)
NAME = re.compile(r"[A-Za-z0-9._-]{1,80}")  # a workload's name, as the workload file allows it: part of a folder
VERSION = re.compile(r"\d+\.\d+\.\d+")  # a Kafka version: fetched by Maven, named in paths
LOG_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}\.log")  # a file of the run's folder shipped back
MAX_WORKER_INDEX = 99_999  # a worker's index names its log file
BEFORE_ASSIGN = (SetClock, Close)  # what a coordinator may send between Hello and Assign (and ProbeClock)


def endpoint(address: str) -> str:
    """HOST:PORT (or [IPv6]:PORT) as a ZeroMQ TCP endpoint."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DimsterError(f"'{address}' is not HOST:PORT (a port 1-65535)")
    return f"tcp://{host}:{port}"


def workload_of(data: dict) -> Workload:
    """A coordinator's workload, as the worker will read it."""
    try:
        return Workload.model_validate(data)
    except ValidationError as e:
        raise ProtocolError(validation_error_line("the workload", e, Workload)) from None


def log_files(folder: Path) -> list[Path]:
    """The run folder's log files to ship: regular files named as logs (a symlink or another name is
    left, with a note in the agent's log)."""
    files = []
    for path in sorted(folder.iterdir()):
        if LOG_NAME.fullmatch(path.name) and path.is_file() and not path.is_symlink():
            files.append(path)
        else:
            log.warning("run folder %s: %r is not shipped (only regular files named NAME.log are)", folder, path.name)
    return files


@dataclass
class Worker:
    """The worker process a run's Assign started, and the pipe to it."""

    process: BaseProcess
    channel: PipeChannel


@dataclass
class Session:
    """The run an agent serves: its coordinator, and its workers by index once assigned."""

    peer: bytes
    workload: str
    coordinator_host: str
    folder: Path
    last_heard: float
    connection: int  # the coordinator's connection (its socket's file descriptor on this host)
    workers: dict[int, Worker] = field(default_factory=dict)
    closed: set[int] = field(default_factory=set)  # workers that said Closed
    clock_offset: float = 0.0
    security: dict[str, str] = field(default_factory=dict)  # the Assign's client security, for live Updates
    hold: ReportHold = field(default_factory=ReportHold)  # its workers' reports, sent as one (report_hold.py)

    def worker_folder(self, index: int) -> Path:
        return self.folder / f"worker-{index}"

    def open_workers(self) -> dict[int, Worker]:
        """The workers that have not said Closed (a closed one's pipe is at its end)."""
        return {index: w for index, w in self.workers.items() if index not in self.closed}


class Agent:
    def __init__(
        self,
        listen: str,
        token: str,
        work_dir: Path | None = None,
        allowances: Allowances | None = None,
        slots: int = 1,
    ):
        self.slots = slots  # workers a run may start here
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.linger = 1000
        self.socket.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)  # a larger one drops its connection
        self.socket.heartbeat_ivl, self.socket.heartbeat_timeout = HEARTBEAT_MS, HEARTBEAT_TIMEOUT_MS
        self.disconnects = self.socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        self.authenticator = serve_securely(self.context, self.socket, token)
        try:
            self.socket.bind(endpoint(listen))
        except zmq.ZMQError as e:
            self.close()
            raise DimsterError(f"cannot listen on {listen}: {e}") from None
        self.work_dir = work_dir or Path(tempfile.gettempdir())
        self.allowances = allowances or Allowances()
        self.session: Session | None = None
        self.stopping = False

    def welcome(self) -> Welcome:
        busy = f"workload {self.session.workload} from {self.session.coordinator_host}" if self.session else ""
        cores, memory = os.cpu_count() or 1, psutil.virtual_memory().total
        return Welcome(__version__, PROTOCOL_VERSION, platform.node(), cores, memory, busy, self.slots)

    def serve(self) -> None:
        start_worker_server()  # once: every run's workers fork from it
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        poller.register(self.disconnects, zmq.POLLIN)
        while not self.stopping:
            session = self.session
            workers = session.open_workers() if session else {}
            for worker in workers.values():
                poller.register(worker.channel.fileno(), zmq.POLLIN)
            due = session.hold.wait(time.monotonic()) if session else None
            ready = dict(poller.poll(200 if due is None else min(200, math.ceil(due * 1000))))
            for worker in workers.values():
                poller.unregister(worker.channel.fileno())
            self._end_if_disconnected()  # first: a closed connection's number may be reused by the next
            if self.socket in ready:
                frames = self.socket.recv_multipart(copy=False)
                self._guarded([frame.bytes for frame in frames], frames[-1].get(zmq.SRCFD))
            for index, worker in workers.items():
                if session is not None and session is self.session and worker.channel.fileno() in ready:
                    self._from_worker(session, index, worker)
            if session is not None and session is self.session and session.hold.wait(time.monotonic()) == 0:
                self._send_reports(session, session.hold.release())
            self._check_session()

    def _send(self, peer: bytes, message: Message) -> None:
        self.socket.send_multipart([peer, encode(message)])

    def _end_if_disconnected(self) -> None:
        """End the run whose coordinator's connection closed: it cannot come back (a new connection is
        a new peer), and its workers must not go on loading the cluster with nobody watching."""
        while self.disconnects.poll(0):
            event = recv_monitor_message(self.disconnects)
            session = self.session
            if session and event["event"] == zmq.EVENT_DISCONNECTED and event["value"] == session.connection:
                self._end_session(session, "the coordinator's connection closed")

    def _guarded(self, frames: list[bytes], connection: int) -> None:
        """One message from a coordinator, inside an error boundary: whatever it holds, the agent answers
        it (Refused, or Failed to the run's own coordinator) and goes on serving."""
        peer = frames[0]
        try:
            if len(frames) not in (2, 3):
                raise ProtocolError(f"a message of {len(frames) - 1} parts (the protocol sends one or two)")
            self._from_coordinator(peer, frames[-1], connection, frames[1] if len(frames) == 3 else None)
        except Exception as e:
            expected = isinstance(e, (DimsterError, ProtocolError))
            reason = str(e) if expected else f"{type(e).__name__}: {e}"
            log.warning("a message from a coordinator was not served: %s", reason, exc_info=not expected)
            mine = self.session is not None and peer == self.session.peer
            self._send(peer, Failed(f"agent on {platform.node()}: {reason}") if mine else Refused(reason))

    def _from_coordinator(self, peer: bytes, data: bytes, connection: int, to: bytes | None) -> None:
        """`to`: the worker index the message is for, None for the agent (or every worker)."""
        try:
            message = decode(data)
        except ProtocolError as e:
            self._send(peer, Refused(f"dimster {__version__} agent: {e}"))
            return
        session = self.session
        if isinstance(message, Hello):
            self._hello(peer, message, connection)
        elif session is None or peer != session.peer:
            self._send(peer, Refused(f"this agent serves {self.welcome().busy_with or 'no run of yours'}"))
        elif isinstance(message, ProbeClock):
            session.last_heard = time.time()
            self._send(peer, ClockProbed(message.sent, time.time()))
        elif isinstance(message, Assign):
            session.last_heard = time.time()
            self._start_worker(session, message)
        else:
            session.last_heard = time.time()
            workers = self._addressed(session, to)
            if not workers and not isinstance(message, BEFORE_ASSIGN):
                raise ProtocolError(f"{type(message).__name__} before Assign: there is no worker to give it to")
            if isinstance(message, SetClock):
                session.clock_offset = message.offset
            if isinstance(message, Update):
                self.allowances.check(workload_of(message.workload), session.security)
            for worker in workers:
                worker.channel.send(message)
            if not session.workers and isinstance(message, Close):  # before any Assign: not needed
                self._end_session(session, "released unused")

    @staticmethod
    def _addressed(session: Session, to: bytes | None) -> list[Worker]:
        """The workers a message is for: the one `to` names, or every one of the run's not yet closed."""
        if to is None:
            return list(session.open_workers().values())
        index = framed_worker(to)
        if index is None or index not in session.workers:
            raise ProtocolError(f"worker {to[:20]!r} is not one this agent runs for the run")
        return [session.workers[index]]

    def _hello(self, peer: bytes, hello: Hello, connection: int) -> None:
        if hello.protocol_version != PROTOCOL_VERSION:
            self._send(
                peer,
                Refused(
                    f"protocol {hello.protocol_version} (dimster {hello.dimster_version}) does not match this agent's "
                    f"protocol {PROTOCOL_VERSION} (dimster {__version__}): run the same dimster version on both"
                ),
            )
            return
        if hello.status_only:
            self._send(peer, self.welcome())
            return
        if self.session is not None:
            self._send(peer, Refused(f"busy with {self.welcome().busy_with}"))
            return
        if not NAME.fullmatch(hello.workload):
            name = hello.workload[:100]
            raise ProtocolError(f"workload name {name!r} is not a workload's name (letters, digits, . _ -)")
        folder = Path(tempfile.mkdtemp(prefix=f"dimster-agent-{hello.workload}-", dir=self.work_dir))
        self.session = Session(peer, hello.workload, hello.coordinator_host, folder, time.time(), connection)
        log.info("serving workload %s from %s", hello.workload, hello.coordinator_host)
        self._send(peer, self.welcome())

    def _start_worker(self, session: Session, message: Assign) -> None:
        assignment = message.assignment
        if assignment.worker_index in session.workers:
            raise ProtocolError(f"a second Assign for worker {assignment.worker_index}: it is running already")
        if len(session.workers) >= self.slots:
            raise ProtocolError(f"an Assign for a worker more than this agent's {self.slots} (--workers)")
        for version in (assignment.kafka_version, assignment.java_clients_version):
            if version and not VERSION.fullmatch(version):
                raise ProtocolError(f"Kafka version {version[:100]!r} is not one (N.N.N)")
        if not 0 <= assignment.worker_index <= MAX_WORKER_INDEX:
            index = assignment.worker_index
            raise ProtocolError(f"worker index {index} is not one (0-{MAX_WORKER_INDEX}): it names a log file")
        self.allowances.check(workload_of(assignment.workload), assignment.client_security)  # validated too
        session.security = assignment.client_security
        folder = session.worker_folder(assignment.worker_index)
        folder.mkdir()
        assignment.log_file = str(folder / f"worker-{assignment.worker_index}.log")
        assignment.clock_offset = session.clock_offset
        process, ours = start_worker(assignment, "dimster-worker")
        session.workers[assignment.worker_index] = Worker(process, PipeChannel(ours))

    def _from_worker(self, session: Session, index: int, worker: Worker) -> None:
        """Relays the worker's message as it was encoded (the coordinator decodes it), after a frame
        with its index; a `Closed` first ships the worker's logs, and the last ends the run here. The
        reports of a run of several workers are held and go as one (report_hold.py); any other
        message of a worker but a Progress sample goes after the reports held before it."""
        to = worker_frame(index)
        try:
            message = worker.channel.recv_bytes()
            kind = kind_of(message)
            if kind == "Reported" and len(session.workers) > 1:
                open_workers = set(session.open_workers())
                self._send_reports(session, session.hold.take(index, decode(message), time.monotonic(), open_workers))
                return
        except (EOFError, OSError):
            worker.process.join(5)
            self._worker_failed(session, index, f"exited with code {worker.process.exitcode}")
            return
        except ProtocolError as e:  # our own worker's bytes: a bug, told to the run, not the agent's end
            self._worker_failed(session, index, f"sent what the agent cannot read ({e})")
            return
        if kind != "Progress":  # a Progress sample has no order to keep with the reports: they stay held
            self._send_reports(session, session.hold.release())
        closed = kind == "Closed"
        if closed:
            worker.process.join(30)
            session.closed.add(index)
            files = log_files(session.worker_folder(index))
            log.info("run %s: worker %d closed; shipping %d log file(s)", session.workload, index, len(files))
            for path in files:
                with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
                    shipped = LogFileSent(path.name, f.read(MAX_LOG_BYTES))
                self.socket.send_multipart([session.peer, to, encode(shipped)])
        self.socket.send_multipart([session.peer, to, message])
        if closed and session.closed >= set(session.workers):
            self._end_session(session, "run closed")

    def _worker_failed(self, session: Session, index: int, why: str) -> None:
        """The run fails with the worker (what the others measured goes first) and ends here."""
        self._send_reports(session, session.hold.release())
        failed = Failed(f"worker {index} on {platform.node()} {why}")
        self.socket.send_multipart([session.peer, worker_frame(index), encode(failed)])
        self._end_session(session, f"worker {index} {why}")

    def _send_reports(self, session: Session, reports: list[Reported]) -> None:
        """Reports of the run's workers, each as the agent's own message (its lines name the workers)."""
        for reported in reports:
            self.socket.send_multipart([session.peer, reported.received or encode(reported)])

    def _check_session(self) -> None:
        session = self.session
        if session and time.time() - session.last_heard > COORDINATOR_TIMEOUT:
            self._end_session(session, f"coordinator silent for {COORDINATOR_TIMEOUT:.0f}s")

    def _end_session(self, session: Session, why: str) -> None:
        """Stop the run's workers (if any) and forget the run."""
        self.session = None
        log.info("workload %s ended: %s", session.workload, why)
        running = [w for w in session.workers.values() if w.process.is_alive()]
        for worker in running:
            with contextlib.suppress(OSError):  # it may be gone already
                worker.channel.send(Close())
        deadline = Deadline(30)
        for worker in running:
            worker.process.join(deadline.left())
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(5)
        shutil.rmtree(session.folder, ignore_errors=True)

    def close(self) -> None:
        if self.session:
            self._end_session(self.session, "agent stopping")
        self.socket.disable_monitor()
        self.disconnects.close(linger=0)
        self.socket.close(linger=0)
        self.authenticator.stop()
        self.context.term()
