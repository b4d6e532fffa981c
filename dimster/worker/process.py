"""A worker process: hosts the clients of its assignment and reports every second.

It ignores SIGINT (Ctrl-C in the terminal reaches the whole process group): the coordinator decides
how a run stops and tells its workers.
"""

import logging
import math
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.util
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import psutil

from dimster.clients import library
from dimster.clients.properties import consumer_role, role_properties, run_libraries
from dimster.clock import Deadline
from dimster.worker import clock
from dimster.worker.client_columns import columns_and_accounts
from dimster.worker.clients import ConsumerClient, ProducerClient
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.lifeline import SERVER_FOLDER, SERVER_STARTER, die_with_parent
from dimster.worker.protocol import (
    PROGRESS_EVERY,
    PROGRESS_SECONDS,
    REPORT_EVERY,
    AddClients,
    Assignment,
    Close,
    Closed,
    CrashConsumers,
    Failed,
    Message,
    ProducersStopped,
    Progress,
    Ready,
    RemoveClients,
    Reported,
    RestartConsumers,
    SetClock,
    StartLoad,
    StopProducers,
    Update,
    WatchRedeliveries,
    decode,
    encode,
    worker_report,
)
from dimster.worker.wake_lag import WakeProbe, host_steal_seconds
from dimster.workload.model import Workload

PAUSE_SECONDS = 5.0  # the longest a worker waits for its paused consumers' last poll before load starts
# What the worker server imports, once, in order: the tie to its starter's life, the command line's
# code (a worker forked from a console script's coordinator runs that script again, which then imports
# nothing new) and the worker's own. Every worker forks from the server with all of it imported.
WORKER_PRELOAD = ["dimster.worker.server_tie", "dimster.cli.app", "dimster.worker.process"]


class PipeChannel:
    """One end of a pipe between two processes of one host, carrying encoded messages."""

    def __init__(self, connection: Connection):
        self.connection = connection

    def send(self, message: Message) -> None:
        self.connection.send_bytes(encode(message))

    def poll(self, timeout: float) -> bool:
        return self.connection.poll(timeout)

    def recv(self) -> Message:
        return decode(self.connection.recv_bytes())

    def recv_bytes(self) -> bytes:
        """A message as it was encoded, to relay as it is (protocol.kind_of tells its kind)."""
        return self.connection.recv_bytes()

    def fileno(self) -> int:
        return self.connection.fileno()


def worker_context() -> ForkServerContext:
    """Worker processes fork from one server process, a child of this one that imported the worker's
    code once. A spawned worker imported it anew, about half a second of CPU each, which a run paid per
    worker and an agent per run (16 workers: 3.7 s to start them, 0.5 s forked; docs/benchmarks.md).
    The server starts with the first worker (or `start_worker_server`) and ends when this process does."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WORKER_PRELOAD)
    return context


def start_worker_server() -> None:
    """Starts the worker server unless it runs: ahead of the workers, its imports run beside the
    caller's start-up. Call it from the main thread: the server ends when the thread that started it
    does. It starts with no folder on its module path that the caller did not put there (Python put
    the current folder first, where a planted module would be imported), and it learns its starter."""
    worker_context()
    folder = multiprocessing.util.get_temp_dir()  # where the server's socket goes (removed at a normal exit)
    server_only = {"PYTHONSAFEPATH": "1", SERVER_STARTER: str(os.getpid()), SERVER_FOLDER: folder}
    saved = {name: os.environ.get(name) for name in server_only}
    os.environ.update(server_only)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def start_process(target: Callable[..., None], args: tuple, name: str) -> BaseProcess:
    """A process forked from the worker server that runs `target(*args)` with this process's
    environment and folder as they are now, as a spawned one would (the server's are those of its
    own start)."""
    start_worker_server()
    started_as = (dict(os.environ), os.getcwd(), target, args)
    process = worker_context().Process(target=_as_started, args=started_as, name=name)
    process.start()
    return process


def _as_started(environ: dict[str, str], folder: str, target: Callable[..., None], args: tuple) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server's own handler (lifeline.tie_worker_server)
    die_with_parent()  # the server, which ends with the starter
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(folder)
    target(*args)


def start_worker(assignment: Assignment, name: str) -> tuple[BaseProcess, Connection]:
    """A worker process for `assignment`, and this end of its pipe."""
    ours, theirs = worker_context().Pipe()
    process = start_process(worker_main, (theirs, assignment), name)
    theirs.close()
    return process, ours


def worker_main(connection: Connection, assignment: Assignment) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(
        filename=assignment.log_file, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    clock.set_offset(assignment.clock_offset)
    channel = PipeChannel(connection)
    try:
        Worker(channel, assignment).serve()
    except (EOFError, OSError):
        logging.getLogger("dimster.worker").warning("the coordinator's end of the pipe closed: exiting")
    except Exception as e:
        logging.getLogger("dimster.worker").exception("worker failed")
        channel.send(Failed(f"worker {assignment.worker_index}: {type(e).__name__}: {e}"))


def report_tick(now: float) -> float:
    """The next whole REPORT_EVERY of the host's monotonic clock after `now`: the workers of one host
    report together, so that their agent merges their reports without holding one (remote/agent.py)."""
    return (now // REPORT_EVERY + 1) * REPORT_EVERY


class Worker:
    def __init__(self, channel: PipeChannel, assignment: Assignment):
        self.channel = channel
        self.assignment = assignment
        self.workload = Workload.model_validate(assignment.workload)
        self._prepare_libraries(self.workload)
        self.total_producers = assignment.total_producers
        self.load_started: float | None = None
        self.cpu_mark = time.process_time()  # this process's CPU seconds at its last report
        self.steal_mark = host_steal_seconds()  # the host's steal time at its last report
        self.process = psutil.Process()  # its memory and threads go with every report
        self.wake_probe = WakeProbe()  # how late its threads wake: with every report
        self.producers = [self._producer(spec) for spec in assignment.producers]
        self.consumers = [self._consumer(spec) for spec in assignment.consumers]
        self.handlers: dict[type, Callable[[Any], None]] = {  # message type -> what it does here
            StartLoad: self._start_load,
            Update: self._updated,
            AddClients: lambda m: self._add(m.producers, m.consumers),
            RemoveClients: lambda m: self._remove(set(m.client_ids)),
            SetClock: lambda m: clock.set_offset(m.offset),
            StopProducers: self._stop_producers,
            CrashConsumers: self._crash,
            RestartConsumers: self._restart,
            WatchRedeliveries: self._watch,
            Close: self._close,
        }
        self.closed = False
        self.counted = [0, 0]  # records sent and received in the intervals it has reported
        self.progress_until = self.next_progress = math.inf  # monotonic: Progress samples after a change
        self.change = 0  # the live change its samples follow (Update.change)

    def _prepare_libraries(self, workload: Workload) -> None:
        """Ready this process for the libraries of the run's clients before any client needs one (the
        Java clients' JVM stays up for the rest of the process)."""
        a = self.assignment
        for name in dict.fromkeys(run_libraries(workload).values()):
            library(name).prepare_process(Path(a.log_file), a.kafka_version, a.java_clients_version)

    def _producer(self, spec) -> ProducerClient:
        a = self.assignment
        client = ProducerClient(spec, self.workload, a.bootstrap_servers, self.total_producers, a.client_security)
        client.load_started = self.load_started
        return client

    def _consumer(self, spec) -> ConsumerClient:
        a = self.assignment
        return ConsumerClient(
            spec, self.workload, a.bootstrap_servers, a.delivery_count_limit, a.record_lock_ms, a.client_security
        )

    @property
    def clients(self):
        return [*self.producers, *self.consumers]

    def report(self, clients=None) -> None:
        clients = self.clients if clients is None else clients
        taken = [client.take_interval() for client in clients]
        end = clock.now()  # the counts' own moment: what follows may wait for the interpreter's lock
        intervals = [interval for interval, _ in taken]
        histograms = HistogramColumns.gather(histograms for _, histograms in taken)
        cpu_now = time.process_time()
        cpu, self.cpu_mark = cpu_now - self.cpu_mark, cpu_now
        steal_now = host_steal_seconds()
        steal, self.steal_mark = max(0.0, steal_now - self.steal_mark), steal_now
        with self.process.oneshot():
            rss, threads = self.process.memory_info().rss, self.process.num_threads()
        cores = len(os.sched_getaffinity(0))
        wake_lag = self.wake_probe.take()
        self.counted[0] += sum(interval.sent for interval in intervals)
        self.counted[1] += sum(interval.received for interval in intervals)
        columns, groups = columns_and_accounts(intervals)  # its consumers' ranges merged per group
        usage = (cpu, rss, threads, wake_lag, steal, cores)
        report = worker_report(self.assignment.worker_index, end, columns, *usage, histograms, groups)
        self.channel.send(Reported(report))
        failed = [c.error for c in clients if c.error]
        if failed:
            self.channel.send(Failed(failed[0]))

    def serve(self) -> None:
        self.wake_probe.start()
        for consumer in self.consumers:
            consumer.start()
        for producer in self.producers:
            producer.start()
        for consumer in self.consumers:
            consumer.subscribed.wait(30)
        for producer in self.producers:
            producer.ready.wait(30)
        self.channel.send(Ready())
        next_report = report_tick(time.monotonic())
        while not self.closed:
            if self.channel.poll(max(0.0, min(next_report, self.next_progress) - time.monotonic())):
                message = self.channel.recv()
                self.handlers[type(message)](message)
            if time.monotonic() >= self.next_progress and not self.closed:
                self._progress()
            if time.monotonic() >= next_report and not self.closed:
                self.report()
                next_report += REPORT_EVERY
                if next_report < time.monotonic():  # fell behind (a long pause): do not burst
                    next_report = report_tick(time.monotonic())

    def _start_load(self, message: StartLoad) -> None:
        """Producers start at `message.at`; consumers paused from the start (the Update before this
        told them) have left their poll loop by then, so that none takes a record of the load."""
        if self.workload.consumers_paused:
            deadline = Deadline(PAUSE_SECONDS)
            while any(c.polling.is_set() for c in self.consumers) and not deadline.passed():
                time.sleep(0.01)
        self.load_started = message.at
        self._set_measure_from(self.clients)  # first: a producer starts pacing once it knows load_started
        for producer in self.producers:
            producer.load_started = message.at

    def _crash(self, message: CrashConsumers) -> None:
        for consumer in self.consumers:
            if consumer.client_id in message.client_ids:
                consumer.crash()

    def _restart(self, message: RestartConsumers) -> None:
        for consumer in self.consumers:
            if consumer.client_id in message.client_ids:
                consumer.rebuild()

    def _watch(self, message: WatchRedeliveries) -> None:
        for consumer in self.consumers:
            if consumer.group == message.group:
                consumer.watch(message.held, message.crashed_at)

    def _stop_producers(self, _message: StopProducers) -> None:
        self._stop(self.producers)
        self.report()
        self.channel.send(ProducersStopped())

    def _close(self, _message: Close) -> None:
        self._stop(self.clients)
        self.report()
        self.channel.send(Closed())
        self.closed = True

    def _set_measure_from(self, clients) -> None:
        """Tell clients where the measured phase starts (warmupSeconds may change live)."""
        if self.load_started is not None:
            for client in clients:
                client.measure_from = self.load_started + self.workload.warmup_seconds

    def _updated(self, message: Update) -> None:
        self._update(Workload.model_validate(message.workload), message.total_producers)
        self.change = message.change
        self.progress_until = time.monotonic() + PROGRESS_SECONDS
        self._progress()

    def _progress(self) -> None:
        """A Progress sample: its counts so far; the next PROGRESS_EVERY later, while the change's
        PROGRESS_SECONDS last."""
        sent = self.counted[0] + sum(producer.interval.sent for producer in self.producers)
        received = self.counted[1] + sum(consumer.interval.received for consumer in self.consumers)
        target = sum(producer.interval.target_rate for producer in self.producers)
        self.channel.send(Progress(clock.now(), sent, received, target, self.change))
        following = time.monotonic() + PROGRESS_EVERY
        self.next_progress = following if following <= self.progress_until else math.inf

    def _update(self, workload: Workload, total_producers: int) -> None:
        """A live modification: clients read the new workload at once; a changed client config
        makes them close and rebuild their Kafka client (producers flush first, share consumers
        release what they hold)."""
        self._prepare_libraries(workload)
        old, self.workload, self.total_producers = self.workload, workload, total_producers
        rebuild_producers = producer_settings(old) != producer_settings(workload)
        rebuild_consumers = consumer_settings(old) != consumer_settings(workload)
        for producer in self.producers:
            producer.workload, producer.total_producers = workload, total_producers
            if rebuild_producers:
                producer.rebuild()
        for consumer in self.consumers:
            consumer.workload = workload
            if rebuild_consumers:
                consumer.rebuild()
            elif old.consumers_paused != workload.consumers_paused:
                consumer.wake.set()  # cut a processing pause short: pause or resume at once
        self._set_measure_from(self.clients)

    def _add(self, producers, consumers) -> None:
        new = [self._producer(spec) for spec in producers] + [self._consumer(spec) for spec in consumers]
        self.producers += [c for c in new if isinstance(c, ProducerClient)]
        self.consumers += [c for c in new if isinstance(c, ConsumerClient)]
        self._set_measure_from(new)
        for client in new:
            client.start()

    def _remove(self, client_ids: set[str]) -> None:
        """Stop these clients and report their last interval before they go, with every other
        client's so far: a report's time is that of each of its clients' intervals (the next report
        covers from here for all of them)."""
        leaving = [c for c in self.clients if c.client_id in client_ids]
        self._stop(leaving)
        self.report()
        self.producers = [c for c in self.producers if c.client_id not in client_ids]
        self.consumers = [c for c in self.consumers if c.client_id not in client_ids]

    @staticmethod
    def _stop(clients) -> None:
        for client in clients:
            client.stop()
        for client in clients:
            if client.thread.is_alive():
                client.thread.join(90)


def producer_settings(w: Workload) -> tuple:
    """What a producer's Kafka client and payloads are built from."""
    return (
        w.client_library.producer,
        w.kafka_config.common_config,
        w.kafka_config.producer_config,
        w.message_size,
        w.payload,
        w.message_distributor,
        w.zipf_alpha,
        w.key_count,
        w.partitions_per_topic,
    )


def consumer_settings(w: Workload) -> tuple:
    """What the run's consumers are built from (a setting of the other consumer role is not)."""
    role = consumer_role(w)
    pausing = w.flow_control.paused_fraction > 0  # on or off, a new client (nothing left paused)
    return (w.client_library.of(role), role_properties(w, role), w.static_membership, pausing)
