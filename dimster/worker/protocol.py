"""The messages between the coordinator and its workers. The protocol *is* these types: a local worker
gets them through a pipe, a remote agent over ZeroMQ, both encoded by `encode`/`decode` (msgpack, every
field converted by its type hint as wire.py does it, never pickle).

Coordinator -> worker: Hello (remote only, the handshake), Assign (remote only: a local worker gets its
assignment when it starts), StartLoad, Update, AddClients, RemoveClients, StopProducers, Close,
ProbeClock, SetClock, CrashConsumers, RestartConsumers, WatchRedeliveries.
Worker -> coordinator: Welcome or Refused (the handshake's answer), Ready, Reported, ProducersStopped,
LogFileSent (a remote agent's logs, before Closed), Closed, Failed, ClockProbed.
"""

import functools
import typing
from dataclasses import dataclass, field

import msgpack
import msgspec
import numpy as np

from dimster.metrics.schema import WARMUP_PREFIX as WARMUP_PREFIX  # the wire carries the Parquet contract's prefix
from dimster.worker.accounts import GroupAccount
from dimster.worker.client_columns import ClientColumns, columns_and_accounts
from dimster.worker.client_columns import ClientInterval as ClientInterval  # the protocol's, defined there
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.wire import LOCAL, Ranges, from_bytes, to_wire
from dimster.workload.model import DEFAULT_LOCK_MS

PROTOCOL_VERSION = 22  # 13: in_doubt; a report's host steal time. 14: ranges and histogram counts packed.
# 15: an agent runs several workers (Welcome.slots); a worker's message travels after a frame with its index.
# 16: a report's histograms as columns (HistogramColumns), not a map in each client's interval.
# 17: a map keyed by tuples as a msgpack map with array keys (was a list of pairs); decoded by msgspec.
# 18: a report's clients as columns (ClientColumns), their counters packed, details only where there are.
# 19: a report's settled ranges and outcomes merged per group (GroupAccount), not per consumer.
# 20: a report's workers as lines (WorkerLine): an agent sends one report for the workers it runs.
# 21: Progress: a worker's counts so far, several a second for a few seconds after a live change.
# 22: a report's delivery counts as one packed column of (client, delivery count, records) (ClientColumns.deliveries).


class ProtocolError(ValueError):
    """Bytes that are not a message of this protocol."""


@dataclass(frozen=True)
class ProducerSpec:
    producer_id: int  # unique in the run; written into every message header
    topic: str
    index_in_topic: int  # PINNED_PARTITIONS pins producer i of a topic to partition i mod partitions


@dataclass(frozen=True)
class ConsumerSpec:
    consumer_id: int
    topic: str
    group: str
    kind: str  # SHARE_GROUP | CONSUMER_GROUP


@dataclass
class Assignment:
    """Everything a worker needs: its clients, the workload (as a dict), where the cluster is."""

    worker_index: int
    bootstrap_servers: str
    workload: dict
    producers: list[ProducerSpec]
    consumers: list[ConsumerSpec]
    total_producers: int  # the target rate is split evenly over every producer of the run
    delivery_count_limit: int  # a record released this often is archived by the broker
    log_file: str  # a local worker's; a remote agent writes into its own folder and ships the files
    kafka_version: str  # the cluster's
    java_clients_version: str = ""  # the kafka-clients version of this worker's JVM ("": the cluster's)
    clock_offset: float = 0.0  # seconds this host's clock is ahead of the coordinator's
    record_lock_ms: int = DEFAULT_LOCK_MS  # the groups' acquisition lock duration at start, as the broker said
    # what every client needs beside bootstrap.servers to reach a secure cluster (kafka/security.py, in
    # librdkafka's names): it travels only in this message, never in the workload or a file
    client_security: dict[str, str] = field(default_factory=dict)


@dataclass
class WakeLag:
    """A report's wake-ups of the worker's probe thread (worker/wake_lag.py): sums and a maximum, so
    that reports add up exactly."""

    wakes: int = 0
    lag_ms_sum: float = 0.0
    lag_ms_max: float = 0.0


@dataclass
class WorkerLine:
    """One worker's part of a report (protocol 20): a worker's report has one line, an agent's report a
    line for each of its workers it merged (worker/report_merge.py)."""

    worker_index: int
    end_time: float  # epoch seconds, in the coordinator's clock
    clients: int = 0  # the report's clients that are this worker's: they follow the previous lines' clients
    cpu_seconds: float = 0.0  # CPU the worker process (all its threads, its JVM's too) used since its last report
    rss_bytes: int = 0  # the worker process's resident memory at the report (its JVM's heap and librdkafka's too)
    threads: int = 0  # the worker process's threads at the report (dimster's, librdkafka's and the JVM's)
    wake_lag: WakeLag | None = None  # how late its threads woke since its last report
    # the host: CPU time the hypervisor gave other guests while this one's vCPUs wanted to run (steal),
    # in seconds summed over its cores, since the worker's last report; and the cores the worker may use
    steal_seconds: float = 0.0
    cores: int = 0


@dataclass
class IntervalReport:
    """What one worker, or an agent's workers together, did in an interval: a line per worker, the
    clients of each line after the previous line's, their histograms, and their groups' accounts."""

    lines: list[WorkerLine]
    clients: ClientColumns  # a list of ClientIntervals is taken as their columns
    # its clients' latency histograms, by (metric, partition); a warm-up record's latency goes under
    # WARMUP_PREFIX + metric
    histograms: HistogramColumns = field(default_factory=HistogramColumns)
    # group -> what its consumers in this report settled, merged (accounts.py): their ranges travel
    # only here, not in each consumer's details
    groups: dict[str, GroupAccount] = field(default_factory=dict)

    @property
    def end_time(self) -> float:
        """The latest of its lines' ends."""
        return max(line.end_time for line in self.lines)

    @functools.cached_property
    def client_line(self) -> np.ndarray:
        """Each client's line (its index in `lines`), in the clients' order."""
        return np.repeat(np.arange(len(self.lines)), [line.clients for line in self.lines])

    def check(self) -> None:
        """A ValueError unless the lines, clients and histograms agree with each other."""
        if not self.lines:
            raise ValueError("a report of no worker")
        if len({line.worker_index for line in self.lines}) != len(self.lines):
            raise ValueError("a worker's two lines in one report")
        sizes = [line.clients for line in self.lines]
        if min(sizes) < 0 or sum(sizes) != len(self.clients):
            raise ValueError(f"lines whose clients do not add up to the report's {len(self.clients)}")
        self.clients.check()
        self.histograms.check(len(self.clients))


def worker_report(
    worker_index: int,
    end_time: float,
    clients: ClientColumns | list[ClientInterval],
    cpu_seconds: float = 0.0,
    rss_bytes: int = 0,
    threads: int = 0,
    wake_lag: WakeLag | None = None,
    steal_seconds: float = 0.0,
    cores: int = 0,
    histograms: HistogramColumns | None = None,
    groups: dict[str, GroupAccount] | None = None,
) -> IntervalReport:
    """One worker's report: one line, for all of `clients`."""
    if isinstance(clients, list):  # ClientIntervals: their accounts move into the groups
        clients, groups = columns_and_accounts(clients)
    line = WorkerLine(worker_index, end_time, len(clients), cpu_seconds, rss_bytes, threads, wake_lag)
    line.steal_seconds, line.cores = steal_seconds, cores
    return IntervalReport([line], clients, histograms or HistogramColumns(), groups or {})


# ---- coordinator -> worker ----------------------------------------------------------------------
@dataclass
class Hello:
    dimster_version: str
    protocol_version: int
    workload: str  # the workload the agent serves (its status, its folder, its log)
    coordinator_host: str
    status_only: bool = False  # `dimster worker status`: answer, take no run


@dataclass
class Assign:
    assignment: Assignment


@dataclass
class StartLoad:
    at: float  # epoch seconds, coordinator's clock


@dataclass
class Update:
    workload: dict
    total_producers: int
    change: int = 0  # the run's live changes so far: its Progress samples carry it (0: not a live change)


@dataclass
class AddClients:
    producers: list[ProducerSpec]
    consumers: list[ConsumerSpec]


@dataclass
class RemoveClients:
    client_ids: list[str]


@dataclass
class StopProducers:
    pass


@dataclass
class CrashConsumers:
    """Each of these share consumers stops dead: no acknowledgement, no close (see ConsumerClient.crash)."""

    client_ids: list[str]


@dataclass
class RestartConsumers:
    client_ids: list[str]  # close each one's Kafka client and start a new one with the same id


@dataclass
class WatchRedeliveries:
    """Tell the group's consumers which records a crashed consumer held, to time their redelivery."""

    group: str
    crashed_at: float  # epoch s, coordinator's clock
    held: dict[int, Ranges]  # producer id -> sequence ranges


@dataclass
class Close:
    pass


@dataclass
class ProbeClock:
    sent: float  # coordinator's clock when sent


@dataclass
class SetClock:
    offset: float  # seconds the worker's clock is ahead of the coordinator's (estimated)


# ---- worker -> coordinator ----------------------------------------------------------------------
@dataclass
class Welcome:
    dimster_version: str
    protocol_version: int
    host: str
    cores: int
    memory_bytes: int
    busy_with: str = ""  # the workload it serves and the coordinator's host, or empty when idle
    slots: int = 1  # workers it runs for one run (`dimster worker serve --workers N`)


@dataclass
class Refused:
    reason: str


@dataclass
class Ready:
    pass


@dataclass
class Reported:
    report: IntervalReport
    # the bytes it came in (decode sets it): the journal keeps the report as it came (report_bytes)
    received: bytes = field(default=b"", compare=False, repr=False, metadata=LOCAL)


@dataclass
class ProducersStopped:
    pass


@dataclass
class LogFileSent:
    name: str
    content: bytes


@dataclass
class Closed:
    pass


@dataclass
class Failed:
    reason: str


@dataclass
class Progress:
    """A worker's counts so far, sent as a live change reaches it and every PROGRESS_EVERY for
    PROGRESS_SECONDS after: the status's rates since the change show within a second, counted from a
    worker's first sample of it. Its reports (once a second) stay the run's record; this is not
    written anywhere."""

    at: float  # epoch seconds, the worker's clock (the coordinator's, corrected)
    sent: int  # records its producers handed over since the worker started
    received: int  # records its consumers received since the worker started
    target_rate: float  # its producers' target now, msg/s
    change: int  # the Update's: which live change it follows


@dataclass
class ClockProbed:
    sent: float  # the probe's, coordinator's clock
    received: float  # the worker's clock when it answered


MESSAGES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        Hello, Assign, StartLoad, Update, AddClients, RemoveClients, StopProducers, Close, ProbeClock, SetClock,
        CrashConsumers, RestartConsumers, WatchRedeliveries,
        Welcome, Refused, Ready, Reported, ProducersStopped, LogFileSent, Closed, Failed, ClockProbed, Progress,
    )
}  # fmt: skip
Message = typing.Any  # one of MESSAGES' types


REPORT_EVERY = 1.0  # seconds: a worker's report cadence, whatever the console's window
PROGRESS_EVERY = 0.2  # seconds between a worker's Progress samples after a live change ...
PROGRESS_SECONDS = 3.0  # ... for this long: by then each worker has reported a whole second after it


def encode(message: Message) -> bytes:
    kind = type(message).__name__
    if MESSAGES.get(kind) is not type(message):
        raise ProtocolError(f"not a message of the protocol: {kind}")
    return msgpack.packb([kind, to_wire(type(message), message)], use_bin_type=True)


def kind_of(data: bytes) -> str:
    """The kind of an encoded message, read without decoding its body: an agent relays its worker's
    messages as they came (a report of a run of several workers it decodes, to merge them)."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data)
    try:
        pair, kind = unpacker.read_array_header(), unpacker.unpack()
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ProtocolError(f"not a message of protocol {PROTOCOL_VERSION}: {type(e).__name__}: {e}") from None
    if pair != 2 or not isinstance(kind, str) or kind not in MESSAGES:
        raise ProtocolError(f"not a message of protocol {PROTOCOL_VERSION}: no kind of its messages")
    return kind


ENVELOPE = msgspec.msgpack.Decoder(tuple[str, msgspec.Raw])  # [kind, body], the body left as bytes


def decode(data: bytes) -> Message:
    try:
        kind, body = ENVELOPE.decode(data)
        message = from_bytes(MESSAGES[kind], body)
    except (msgspec.DecodeError, KeyError, RecursionError) as e:  # RecursionError: nesting beyond any message's
        raise ProtocolError(f"not a message of protocol {PROTOCOL_VERSION}: {type(e).__name__}: {e}") from None
    if isinstance(message, Reported):
        if message.received:
            raise ProtocolError(f"not a message of protocol {PROTOCOL_VERSION}: a report's received bytes on the wire")
        try:
            message.report.check()
        except ValueError as e:
            raise ProtocolError(f"not a report of protocol {PROTOCOL_VERSION}: {e}") from None
        message.received = data
    return message


REPORTED = msgpack.packb(["Reported", {"report": None}])[:-1]  # what encode puts before a report's own bytes


def report_bytes(received: bytes) -> bytes | None:
    """The report's own msgpack bytes within the Reported message it came in, None when it came in
    another form (or not as bytes: an in-memory fake's)."""
    return received[len(REPORTED) :] if received.startswith(REPORTED) else None


def worker_frame(index: int) -> bytes:
    """The frame that names worker `index` before its message, between a coordinator and an agent."""
    return str(index).encode()


def framed_worker(frame: bytes) -> int | None:
    """The worker index a frame names (worker_frame), None when it names none."""
    return int(frame) if frame.isdigit() and len(frame) <= 5 else None
