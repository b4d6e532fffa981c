"""Workers on `dimster worker serve` agents: one ZeroMQ DEALER socket per agent, CURVE-secured by
the shared token. An agent runs as many workers as its Welcome's `slots`; the run's workers go to the
agents in turn (worker 0 to the first agent, 1 to the second, ...), and a message to or from a worker
travels after a frame with its index. Liveness: every message counts as a heartbeat, and the
coordinator probes each agent every second (the probes also estimate its clock offset, see clocks.py);
an agent silent for `timeout` seconds is lost, with every worker it ran."""

import platform
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import zmq

from dimster import __version__
from dimster.clock import Deadline
from dimster.cluster.backend import ClusterBackend
from dimster.coordinator.workers.agent_handshake import WorkersError, handshake
from dimster.coordinator.workers.clocks import ClockEstimate, clock_sample
from dimster.coordinator.workers.seam import WorkerLost
from dimster.coordinator.workers.undecoded import Undecoded, in_place
from dimster.errors import DimsterError
from dimster.profile import ProfileBase
from dimster.remote.agent import COORDINATOR_TIMEOUT
from dimster.remote.security import read_token
from dimster.results.bundle import ResultsBundle
from dimster.results.records import ClockOffset
from dimster.worker.protocol import (
    PROTOCOL_VERSION,
    REPORTED,
    Assign,
    Assignment,
    ClockProbed,
    Close,
    Closed,
    Hello,
    LogFileSent,
    Message,
    ProbeClock,
    ProtocolError,
    SetClock,
    Welcome,
    decode,
    encode,
    framed_worker,
    worker_frame,
)

PROBE_EVERY = 1.0
# An agent the coordinator gave up on may not hear it either (a partition, a stall): its workers go on
# until it ends the run on its own, COORDINATOR_TIMEOUT after the last probe it heard, and their
# consumers may settle records until then that the coordinator never hears of. STOP_SLACK: for the
# agent to see the silence (it looks 5 times a second) and its workers the Close.
STOP_SLACK = 2.0
# Messages one receive takes at most, in turn from each agent that has some; the rest wait in their
# sockets (unbounded on this side: an agent's ROUTER drops what a full queue cannot take). A report
# counts as many as the workers' lines it carries (an agent's merged report: one a worker). Lost
# workers come on top. The loop's own work (console lines, status, live changes) runs between
# receives, so a loop behind a thousand workers' reports still prints on time, and only a pass's
# reports are decoded at once: at the pass's end, together (undecoded.py).
MOST_A_PASS = 128
# Once a message has come, a receive takes what else comes within this long in the same pass: a pass
# has a cost of its own (the aggregate's, the writer's, the journal's per call), which a fleet of
# single workers reporting at moments spread over the second would otherwise pay a report at a time
# (1,024 of them: 0.77-0.87 of a core, against 0.54-0.60 with 50 ms of reports taken in together; 100
# ms and 128 lines a pass take 5 % more off, for some 35 ms more of a report's wait at the median:
# docs/benchmarks.md). The loop's own work waits as long at most; a control request does not.
GATHER_SECONDS = 0.1
FIRST_PROBES = 5  # before the assignment goes out, so workers start on a corrected clock
RESEND_OFFSET_ABOVE = 0.0002  # seconds an estimate must move before the worker hears of it
LOG_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")  # an agent's log file: a plain name, never a path


@dataclass
class AgentLink:
    index: int
    address: str
    socket: zmq.Socket
    welcome: Welcome
    clock: ClockEstimate = field(default_factory=ClockEstimate)
    last_heard: float = 0.0  # time.monotonic() of its last message
    offset_sent: float = 0.0
    gone: bool = False  # lost: none of its workers is heard of again
    workers: list[int] = field(default_factory=list)  # the run's workers it runs


class RemoteWorkers:
    def __init__(self, addresses: list[str], token: str, log_dir: Path | None = None, timeout: float = 10.0):
        self.addresses = addresses
        self.token = token
        self.log_dir = log_dir
        self.timeout = timeout
        self.context = zmq.Context()
        self.closed = False
        self.links: list[AgentLink] = []
        self.released: list[AgentLink] = []  # agents the run did not need
        self.owner: list[AgentLink] = []  # worker index -> the agent that runs it
        self.gone: set[int] = set()  # workers closed or lost
        self._next_probe = 0.0
        self._listened = time.monotonic()  # when receive() last ended: agents are heard only while it runs
        self._served_last = -1  # the index of the agent whose message was taken last
        self.behind = False  # the last receive left messages waiting (MOST_A_PASS)
        self._undecoded: dict[int, Undecoded] = {}  # by agent: its report of this pass not decoded yet

    @property
    def capacity(self) -> int:
        """Workers the agents can run: their slots, once connected (one each before)."""
        return sum(link.welcome.slots for link in self.links) if self.links else len(self.addresses)

    def connect(self, workload: str) -> list[Welcome]:
        """Handshake with every agent and take a first clock estimate; fails on the first agent that
        cannot serve the run."""
        hello = Hello(__version__, PROTOCOL_VERSION, workload, platform.node())
        try:
            for index, address in enumerate(self.addresses):
                socket, welcome = handshake(self.context, address, self.token, hello)
                self.links.append(AgentLink(index, address, socket, welcome, last_heard=time.monotonic()))
            for link in self.links:
                for _ in range(FIRST_PROBES):
                    link.socket.send(encode(ProbeClock(time.time())))
                    if link.socket.poll(1000):
                        try:
                            self._handle(link, None, decode(link.socket.recv_multipart()[-1]))
                        except ProtocolError as e:
                            raise WorkersError(f"agent {link.address} answered in another protocol: {e}") from None
        except DimsterError:
            self.close()
            raise
        self._listened = time.monotonic()
        return [link.welcome for link in self.links]

    def start(self, assignments: list[Assignment]) -> None:
        """Each assignment to the agents in turn, as far as each one's slots go; an agent left without
        one is released."""
        most = max((link.welcome.slots for link in self.links), default=0)
        turns = [link for slot in range(most) for link in self.links if slot < link.welcome.slots]
        self.owner = turns[: len(assignments)]
        for assignment, link in zip(assignments, self.owner, strict=True):
            link.workers.append(assignment.worker_index)
            assignment.clock_offset = link.offset_sent = link.clock.offset
            link.socket.send(encode(Assign(assignment)))
        self.links, self.released = [k for k in self.links if k.workers], [k for k in self.links if not k.workers]
        for link in self.released:
            link.socket.send(encode(Close()))

    def send(self, index: int, message: Message) -> None:
        link = self.owner[index]
        if not link.gone and index not in self.gone:
            link.socket.send_multipart([worker_frame(index), encode(message)])

    def receive(self, timeout: float, doorbell: int | None = None) -> list[tuple[int, Message | WorkerLost]]:
        now = time.monotonic()  # silences and probe turns; a probe carries the wall clock
        if (away := now - self._listened - PROBE_EVERY) > 0:  # the run loop was busy elsewhere (starting
            for link in self.links:  # the workers, a long step): no probe went out, and that is no silence
                link.last_heard += away
        if now >= self._next_probe:
            self._next_probe = now + PROBE_EVERY
            for link in self.links:
                if not link.gone:
                    link.socket.send(encode(ProbeClock(time.time())))
        poller = zmq.Poller()
        live = {link.socket: link for link in self.links if not link.gone}
        for socket in live:
            poller.register(socket, zmq.POLLIN)
        if doorbell is not None:
            poller.register(doorbell, zmq.POLLIN)
        received: list[tuple[int, Message | WorkerLost | Undecoded]] = []
        deadline, room = Deadline(timeout), MOST_A_PASS
        while True:
            polled = dict(poller.poll(int(deadline.left() * 1000)))
            took, lines = self._take_turns([live[socket] for socket in polled if socket != doorbell], room)
            if took and not received and deadline.left() > GATHER_SECONDS:
                deadline = Deadline(GATHER_SECONDS)  # what else comes meanwhile comes in this pass
            received += took
            room -= lines
            if room <= 0 or self.behind or doorbell in polled or deadline.passed():
                break
        for held in self._undecoded.values():
            self._decode(held)
        self._undecoded.clear()
        taken = in_place(received)
        for link in self.links:
            if not link.gone and time.monotonic() - link.last_heard > self.timeout:
                taken += self._lose(link, f"silent for {self.timeout:.0f}s")
        self._listened = time.monotonic()
        return taken

    def _take_turns(
        self, ready: list[AgentLink], room: int
    ) -> tuple[list[tuple[int, Message | WorkerLost | Undecoded]], int]:
        """Messages of the `ready` agents up to `room` workers' lines, one from each in turn, starting
        after the agent served last (so that none waits behind the others pass after pass), and the
        lines they took. An agent with messages waiting has been heard, whether or not its turn comes."""
        now, count = time.monotonic(), len(self.links)
        for link in ready:
            link.last_heard = now
        ready.sort(key=lambda link: (link.index - self._served_last - 1) % count)
        received: list[tuple[int, Message | WorkerLost | Undecoded]] = []
        taken = 0
        while ready and taken < room:
            for link in list(ready):
                if link.gone or not link.socket.poll(0):
                    ready.remove(link)
                elif taken < room:
                    messages = self._take(link, link.socket.recv_multipart())
                    received += messages
                    taken += max(1, sum(m.lines if isinstance(m, Undecoded) else 1 for _, m in messages))
                    self._served_last = link.index
        self.behind = any(not link.gone and link.socket.poll(0) for link in ready)
        return received, taken

    def _take(self, link: AgentLink, frames: list[bytes]) -> list[tuple[int, Message | WorkerLost | Undecoded]]:
        """One message from an agent: a worker's (after its index) or the agent's own (which, when it
        is not the agent's business, is its first worker's). A report waits for the pass's end to be
        decoded, unless the agent sends more first (a report that does not decode loses the agent
        before anything it sent after)."""
        if (held := self._undecoded.pop(link.index, None)) is not None:
            self._decode(held)
        if link.gone:
            return []
        try:
            index = framed_worker(frames[0]) if len(frames) == 2 else None
            if len(frames) not in (1, 2) or (len(frames) == 2 and index not in link.workers):
                raise ProtocolError(f"a message for no worker it runs ({len(frames)} frames)")
            if frames[-1].startswith(REPORTED):  # an agent's own report has a line for each of its workers
                lines = len(link.workers) if index is None else 1
                held = self._undecoded[link.index] = Undecoded(link, index, frames[-1], lines)
                return [(_addressee(link, index), held)]
            message = self._handle(link, index, decode(frames[-1]))
        except ProtocolError as e:
            return self._lose(link, f"sent what dimster {__version__} cannot read ({e})")
        return [] if message is None else [(_addressee(link, index), message)]

    def _decode(self, held: Undecoded) -> None:
        """A report that waited for its pass's end, decoded in its place."""
        link = held.link
        try:
            message = self._handle(link, held.worker, decode(held.data))
            held.taken = [] if message is None else [(_addressee(link, held.worker), message)]
        except ProtocolError as e:
            held.taken = self._lose(link, f"sent what dimster {__version__} cannot read ({e})")

    def _lose(self, link: AgentLink, why: str) -> list[tuple[int, Message | WorkerLost]]:
        """The link's workers lost: heard of no more, their logs noted as left on the agent."""
        link.gone = True
        lost: list[tuple[int, Message | WorkerLost]] = []
        for index in link.workers:
            if index not in self.gone:
                self.gone.add(index)
                self._note_missing_logs(link, index)
                # it heard us last no later than now (and we probe no more)
                stopped_by = time.time() + COORDINATOR_TIMEOUT + PROBE_EVERY + STOP_SLACK
                lost.append((index, WorkerLost(f"worker {index} (agent {link.address}) {why}", stopped_by)))
        return lost

    def _handle(self, link: AgentLink, index: int | None, message: Message) -> Message | None:
        """Take what the link itself consumes (clock answers, log files); return the rest."""
        now = time.time()  # a clock sample's: the wall clock
        link.last_heard = time.monotonic()
        if isinstance(message, ClockProbed):
            if self.behind:  # the answer may have waited behind the messages the last pass left: no sample
                return None
            link.clock.add(clock_sample(message.sent, message.received, now))
            if abs(link.clock.offset - link.offset_sent) > RESEND_OFFSET_ABOVE:
                link.offset_sent = link.clock.offset
                link.socket.send(encode(SetClock(link.offset_sent)))  # the agent's: for all its workers
            return None
        if isinstance(message, LogFileSent):
            if LOG_NAME.fullmatch(message.name):
                (self._logs() / message.name).write_bytes(message.content)
            else:  # the bundle's files are the coordinator's to name: no path, no hidden file, no '..'
                with (self._logs() / f"worker-{index}.log.refused").open("a") as note:
                    note.write(f"agent {link.address} sent a log file named {message.name!r}: not a plain file name\n")
            return None
        if isinstance(message, Closed) and index is not None:
            self.gone.add(index)
            link.gone = all(w in self.gone for w in link.workers)
        return message

    def _logs(self) -> Path:
        """Where the agents' log files go: set (agents_in_bundle) before the run's workers start."""
        assert self.log_dir is not None, "the agents' logs before agents_in_bundle()"
        return self.log_dir

    def _note_missing_logs(self, link: AgentLink, index: int) -> None:
        note = self._logs() / f"worker-{index}.log.missing"
        note.write_text(f"agent {link.address} (host {link.welcome.host}) was lost: its worker logs stayed on it\n")

    def close(self) -> list[str]:
        if self.closed:
            return []
        self.closed = True
        for link in [*self.links, *self.released]:
            link.socket.close(linger=100)  # a Close to a released agent still goes out
        self.context.term()
        return []

    def describe(self) -> list[dict]:
        return [
            {
                "index": index,
                "host": link.welcome.host,
                "address": link.address,
                "cores": link.welcome.cores,
                "alive": not link.gone and index not in self.gone,
            }
            for index, link in enumerate(self.owner)
        ]

    def clock_offsets(self) -> dict[int, ClockOffset]:
        return {index: link.clock.as_record() for index, link in enumerate(self.owner)}


def _addressee(link: AgentLink, worker: int | None) -> int:
    """The worker a message is for: the one it names, or the agent's first (the agent's own message)."""
    return worker if worker is not None else link.workers[0]


def agents_in_bundle(agents: RemoteWorkers, bundle: ResultsBundle) -> tuple[RemoteWorkers, int]:
    """The run's agents, with the bundle: their logs go there, their token is masked in it, and each
    one's connection is an event."""
    agents.log_dir = bundle.path / "logs"
    bundle.redactor.learn({"workerToken": agents.token})
    for link in agents.links:
        welcome = link.welcome
        where = {"address": link.address, "host": welcome.host}
        bundle.event("agent_connected", **where, cores=welcome.cores, slots=welcome.slots)
    return agents, agents.capacity


class AgentLauncher:
    """`workers: [{address: HOST:PORT}, ...]`: the agents the environment lists, connected and checked
    (token, version, idle) before anything else starts."""

    client_bootstrap = None

    def __init__(self, profile: ProfileBase, progress: Callable[[str], None] = print):
        self.profile = profile
        self.count = len(profile.agents)
        self.agents: RemoteWorkers | None = None

    @staticmethod
    def takes(workers: object) -> bool:
        return isinstance(workers, list)

    def check_client_versions(self, versions: dict[str, str]) -> None:
        pass  # a JVM per worker: any version

    def connect(self, run_name: str) -> None:
        profile = self.profile
        token = read_token(profile.worker_token_file, profile.worker_token_env, what="workerTokenFile")
        self.agents = RemoteWorkers(profile.agents, token, timeout=profile.worker_timeout_seconds)
        self.agents.connect(run_name)

    def start(self, cluster: ClusterBackend, run_name: str) -> None:
        pass

    def workers(self, bundle: ResultsBundle) -> tuple[RemoteWorkers, int]:
        assert self.agents is not None, "workers() before connect()"
        return agents_in_bundle(self.agents, bundle)

    def close(self) -> None:
        if self.agents:
            self.agents.close()
