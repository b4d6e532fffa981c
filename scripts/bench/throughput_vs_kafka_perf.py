#!/usr/bin/env python3
"""How fast is one dimster client next to Kafka's own perf tools, on one real cluster, in one run?

1. producer: one dimster ProducerClient at an unreachable target rate against
   org.apache.kafka.tools.ProducerPerformance (--throughput -1), same record size and producer
   config, a fresh topic of the same partition count for each;
2. share consumer: one dimster ConsumerClient (SHARE_GROUP) against
   org.apache.kafka.tools.ShareConsumerPerformance (--threads 1), each in its own share group
   draining the same pre-filled topic from the earliest offset.

The dimster client is measured once per client library of `--libraries` (`clientLibrary`:
librdkafka, or Kafka's Java clients in this process through JPype), as the sides
`dimster-librdkafka` and `dimster-java`. The JVM of the Java clients starts before any
measurement, so no measurement includes its start-up.

Each measurement is repeated (`--repeat`, the order rotating so that no side always goes first)
and the median reported, with the ratios of each dimster library to the Kafka tool and of java to
librdkafka. Runs are bounded in records and in time; everything is on loopback.

Without `--env`, or with an environment that does not exist, the script makes a scratch project (a
copy of run/environments/local.yaml on ports 19892/19992/20192, and run/broker-configs/) in a temporary
folder, starts its cluster through the dimster CLI and stops it again at the end. An existing
environment (found through DIMSTER_PROJECT_DIR / the working directory, as the CLI does) is used
as it is; a cluster that was already running is left running.

Not a test: run it by hand, e.g. `.venv/bin/python scripts/bench/throughput_vs_kafka_perf.py`.
See docs/benchmarks.md for the method and measured results.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import logging
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import TypeVar, get_args

import confluent_kafka
import psutil
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from dimster.clients.jvm import start_jvm
from dimster.kafka.admin import admin_client, wait_until_partitions_serve
from dimster.kafka.distribution import KafkaDistribution, java_executable, kafka_distribution
from dimster.paths import environments_dir
from dimster.worker.clients import ConsumerClient, LoadClient, ProducerClient
from dimster.worker.protocol import ConsumerSpec, ProducerSpec
from dimster.workload.model import Library, Workload

REPO = Path(__file__).resolve().parents[2]
DEFAULT_ENV = "bench"
SCRATCH_PORTS = {
    "brokerPortBase": 19892,
    "controllerPortBase": 19992,
    "brokerMetricsPortBase": 20192,
}  # clear of the shipped profiles (19092-19700) and metrics_overhead.py (20092)
ADMIN_TIMEOUT = 30.0
TOOL_JVM_OPTIONS = (  # what kafka-producer-perf-test.sh / kafka-run-class.sh use
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-Djava.awt.headless=true",
    "-Dlog4j2.level=WARN",
)
MB = 1024 * 1024  # the perf tools' MB

log = logging.getLogger("bench")
T = TypeVar("T")


# ---- the cluster ------------------------------------------------------------------------------------
@dataclass
class Cluster:
    env: str
    bootstrap: str
    kafka_version: str
    broker_pids: list[int]


def dimster_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the dimster CLI of this interpreter with the current DIMSTER_* environment."""
    command = [sys.executable, "-m", "dimster", *args]
    result = subprocess.run(command, capture_output=True, text=True, env=os.environ)
    if check and result.returncode != 0:
        raise SystemExit(f"`dimster {' '.join(args)}` failed ({result.returncode}): {result.stderr.strip()}")
    return result


def make_scratch_project(root: Path, env: str) -> None:
    """A project folder with `env` = local.yaml on the scratch ports, and the broker configs."""
    (root / "run" / "environments").mkdir(parents=True)
    shutil.copytree(REPO / "run" / "broker-configs", root / "run" / "broker-configs")
    text = (REPO / "run" / "environments" / "local.yaml").read_text()
    for key, port in SCRATCH_PORTS.items():
        text, count = re.subn(rf"(?m)^({key}:\s*)\d+", rf"\g<1>{port}", text)
        if count != 1:
            raise SystemExit(f"run/environments/local.yaml has no single '{key}:' line to move to {port}")
    (root / "run" / "environments" / f"{env}.yaml").write_text(text)


@contextlib.contextmanager
def bench_cluster(env: str) -> Iterator[Cluster]:
    """The running cluster of `env`; started (and at the end stopped) here unless it already ran."""
    scratch: Path | None = None
    if not (environments_dir() / f"{env}.yaml").is_file():
        scratch = Path(tempfile.mkdtemp(prefix="dimster-bench-"))
        make_scratch_project(scratch, env)
        os.environ["DIMSTER_PROJECT_DIR"] = str(scratch)
        os.environ["DIMSTER_STATE_DIR"] = str(scratch / "state")  # never a recorded cluster of the same name
        log.info("scratch project %s", scratch)
    started = False
    try:
        if dimster_cli("cluster", "status", env, check=False).returncode != 0:
            log.info("starting cluster '%s' ...", env)
            started = True
            dimster_cli("cluster", "up", env)
        status = json.loads(dimster_cli("cluster", "status", env, "--json").stdout)
        yield Cluster(
            env,
            status["bootstrap_servers"],
            status["kafka_version"],
            [n["pid"] for n in status.get("nodes", []) if n.get("pid")],
        )
    finally:
        if started:
            log.info("stopping cluster '%s' ...", env)
            dimster_cli("cluster", "down", env, *(["--purge"] if scratch else []), check=False)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = admin_client(bootstrap)
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=ADMIN_TIMEOUT).values():
        future.result(timeout=ADMIN_TIMEOUT + 5)
    if not wait_until_partitions_serve(bootstrap, {topic: range(partitions)}, ADMIN_TIMEOUT):
        raise SystemExit(f"the partitions of topic {topic} were not served within {ADMIN_TIMEOUT:.0f}s")


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = admin_client(bootstrap)
    for future in admin.delete_topics([topic], request_timeout=ADMIN_TIMEOUT).values():
        with contextlib.suppress(Exception):
            future.result(timeout=ADMIN_TIMEOUT + 5)


def share_groups_from_earliest(bootstrap: str, groups: list[str]) -> None:
    """Share groups start at the latest offset by default; these start at the earliest."""
    admin = admin_client(bootstrap)  # referenced until every future has resolved
    earliest = [ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)]
    configs = [ConfigResource(ConfigResource.Type.GROUP, g, incremental_configs=earliest) for g in groups]
    for future in admin.incremental_alter_configs(configs).values():
        future.result(timeout=ADMIN_TIMEOUT)
    del admin


# ---- measurements -----------------------------------------------------------------------------------
@dataclass
class Measurement:
    """One timed run of one side. `cpu_s`: CPU of the client process (the tool's JVM with its
    start-up, or this Python process with every thread of librdkafka or of the in-process JVM);
    `broker_cpu_s`: CPU of the broker processes meanwhile."""

    kind: str  # producer | share_consumer
    side: str  # kafka | dimster-librdkafka | dimster-java
    records: int
    seconds: float
    records_per_s: float
    mb_per_s: float
    cpu_s: float = 0.0
    broker_cpu_s: float = 0.0
    steady_records_per_s: float | None = None  # share consumers: from the first record on
    extra: dict = field(default_factory=dict)
    other_cpu_s: float = 0.0  # CPU used meanwhile by everything else on the machine


KAFKA = "kafka"  # the side of Kafka's perf tools


def dimster_side(library: str) -> str:
    """The side of a dimster client run by `library`: dimster-librdkafka, dimster-java."""
    return f"dimster-{library}"


def library_of(side: str) -> str:
    return side.removeprefix("dimster-")


def side_names(args: argparse.Namespace) -> list[str]:
    """Every measured side: Kafka's tool, then one dimster side per --libraries."""
    return [KAFKA, *(dimster_side(library) for library in args.libraries)]


def ratio_pairs(names: list[str]) -> list[tuple[str, str]]:
    """(side, reference) of every reported ratio: each dimster library to the Kafka tool, java to librdkafka."""
    pairs = [(side, KAFKA) for side in names if side != KAFKA]
    java, librdkafka = dimster_side("java"), dimster_side("librdkafka")
    if java in names and librdkafka in names:
        pairs.append((java, librdkafka))
    return pairs


class CpuMeter:
    """CPU seconds of this process, its finished children, the brokers and everything else on the
    machine (`other`: other people's work on a shared host), over a `with` block."""

    def __init__(self, broker_pids: list[int]):
        self.brokers = [psutil.Process(pid) for pid in broker_pids if psutil.pid_exists(pid)]
        self.own = self.children = self.broker = self.other = 0.0

    @staticmethod
    def _machine() -> float:
        t = psutil.cpu_times()
        return t.user + t.nice + t.system + getattr(t, "irq", 0) + getattr(t, "softirq", 0) + getattr(t, "steal", 0)

    @staticmethod
    def _children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def _broker(self) -> float:
        return sum(sum(p.cpu_times()[:2]) for p in self.brokers)

    def __enter__(self) -> CpuMeter:
        self._start = (time.process_time(), self._children(), self._broker(), self._machine())
        return self

    def __exit__(self, *exc: object) -> None:
        own, children, broker, machine = time.process_time(), self._children(), self._broker(), self._machine()
        self.own, self.children, self.broker = own - self._start[0], children - self._start[1], broker - self._start[2]
        self.other = max(0.0, machine - self._start[3] - self.own - self.children - self.broker)


def wait_for_quiet(args: argparse.Namespace) -> None:
    """Pause, then wait (at most --quiet-wait s) until the machine's CPU use drops below --quiet-below."""
    time.sleep(args.pause)
    deadline = time.monotonic() + args.quiet_wait
    while (busy := psutil.cpu_percent(interval=1.0)) > args.quiet_below * 100:
        if time.monotonic() > deadline:
            log.info("the machine is still %.0f%% busy; measuring anyway", busy)
            return


def tool_command(dist: KafkaDistribution, main_class: str, *args: str) -> list[str]:
    return dist.java(f"org.apache.kafka.tools.{main_class}", *args, jvm_options=TOOL_JVM_OPTIONS)


def run_tool(command: list[str], timeout: float) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"{command[-1]} ... failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


def producer_properties(args: argparse.Namespace) -> dict[str, str]:
    """The producer config both sides get."""
    return {
        "acks": "all",
        "linger.ms": str(args.linger_ms),
        "batch.size": str(args.batch_size),
        "compression.type": "none",
        "enable.idempotence": args.idempotence,
    }


PERF_SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency")


def perf_producer(
    dist: KafkaDistribution, cluster: Cluster, topic: str, records: int, args: argparse.Namespace
) -> Measurement:
    """ProducerPerformance at full speed; its own summary line (timed up to the final flush)."""
    props = [f"{k}={v}" for k, v in {"bootstrap.servers": cluster.bootstrap, **producer_properties(args)}.items()]
    command = tool_command(
        dist,
        "ProducerPerformance",
        *("--topic", topic, "--num-records", str(records), "--record-size", str(args.record_size)),
        *("--throughput", "-1", "--producer-props", *props),
    )
    with CpuMeter(cluster.broker_pids) as cpu:
        started = time.monotonic()
        out = run_tool(command, timeout=args.max_seconds + 120)
        wall = time.monotonic() - started
    summary = [m for line in out.splitlines() if "50th" in line and (m := PERF_SUMMARY.search(line))]
    if not summary:
        raise SystemExit(f"no summary line in ProducerPerformance's output:\n{out}")
    sent, rate, mb_rate, latency = summary[-1].groups()
    return Measurement(
        "producer",
        KAFKA,
        int(sent),
        int(sent) / float(rate),
        float(rate),
        float(mb_rate),
        cpu.children,
        cpu.broker,
        extra={"avg_latency_ms": float(latency), "process_wall_s": round(wall, 3)},
        other_cpu_s=cpu.other,
    )


def producer_workload(args: argparse.Namespace, partitions: int, rate: float, library: str) -> Workload:
    config: dict[str, str | int] = dict(producer_properties(args))
    return Workload.model_validate(
        {
            "name": "bench",
            "partitionsPerTopic": partitions,
            "messageSize": args.record_size,
            "producerRate": rate,
            "clientLibrary": {"producer": library},
            "kafkaConfig": {"producerConfig": config},
        }
    )


def spec(cls: type[T], **values: object) -> T:
    """A ProducerSpec/ConsumerSpec from those of `values` its current definition has (it evolves)."""
    return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})


def stop(client: LoadClient) -> None:
    """Ask the client's thread to finish (flushing or closing its Kafka client), and wait for it."""
    if hasattr(client, "stop"):
        client.stop()
    else:
        client.stopping.set()
    client.thread.join()


def instrument(client: LoadClient, profile_out: Path | None) -> dict[str, float]:
    """Measure the CPU time of the client's own thread (filled in when it ends: a thread near 100%
    busy is what limits the client), and run it under cProfile (written to `profile_out`) if asked."""
    body, measured = client.run, {"thread_cpu_s": 0.0}

    def run() -> None:
        profiler = cProfile.Profile() if profile_out else None
        if profiler:
            profiler.enable()
        started = time.thread_time()
        try:
            body()
        finally:
            measured["thread_cpu_s"] = time.thread_time() - started
            if profiler:
                profiler.disable()
                profiler.dump_stats(profile_out)

    client.run = run  # type: ignore[method-assign]
    return measured


def thread_cpu(measured: dict[str, float], records: int, seconds: float) -> dict[str, float]:
    cpu = measured["thread_cpu_s"]
    return {
        "thread_cpu_s": round(cpu, 3),
        "thread_busy": round(cpu / seconds, 3),
        "thread_cpu_us_per_record": round(cpu / max(records, 1) * 1e6, 3),
    }


def dimster_producer(
    cluster: Cluster,
    topic: str,
    records: int,
    args: argparse.Namespace,
    library: str,
    profile_out: Path | None = None,
) -> Measurement:
    """One ProducerClient of `library` at 1e9 msg/s, stopped after `records` (or `--max-seconds`);
    acked / time to flushed."""
    workload = producer_workload(args, args.partitions, 1e9, library)
    producer = spec(ProducerSpec, producer_id=0, topic=topic, index_in_topic=0, partitions=args.partitions)
    client = ProducerClient(producer, workload, cluster.bootstrap, 1)
    thread = instrument(client, profile_out)
    acked = errors = 0
    with CpuMeter(cluster.broker_pids) as cpu:
        started = time.time()
        client.load_started = started
        client.start()
        next_take = started + 1
        while client.thread.is_alive() and client.sequence < records and time.time() - started < args.max_seconds:
            time.sleep(0.01)
            if time.time() >= next_take:  # as the worker does, once a second
                interval = client.take_interval()
                acked, errors = acked + interval.acked, errors + interval.send_errors
                next_take += 1
        stop(client)
        seconds = time.time() - started
    interval = client.take_interval()
    acked, errors = acked + interval.acked, errors + interval.send_errors
    if client.error:
        raise SystemExit(f"the dimster {library} producer failed: {client.error}")
    return Measurement(
        "producer",
        dimster_side(library),
        acked,
        seconds,
        acked / seconds,
        acked * args.record_size / MB / seconds,
        cpu.own,
        cpu.broker,
        extra={"sent": client.sequence, "send_errors": errors, **thread_cpu(thread, acked, seconds)},
        other_cpu_s=cpu.other,
    )


def prefill(dist: KafkaDistribution, cluster: Cluster, topic: str, records: int, args: argparse.Namespace) -> None:
    """Write `records` records of `--record-size` into `topic`, by ProducerPerformance or a dimster
    producer (librdkafka: only the values matter)."""
    if args.prefill == "kafka":
        perf_producer(dist, cluster, topic, records, args)
        return
    done = dimster_producer(cluster, topic, records, args, "librdkafka")
    if done.records < records:
        raise SystemExit(f"pre-filling {topic}: only {done.records} of {records} records were acked")


STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"  # the tools' default --date-format
SHARE_STATS = re.compile(
    rf"^(?P<start>{STAMP}), (?P<end>{STAMP}), (?P<mb>[\d.]+), (?P<mb_rate>[\d.]+), (?P<rate>[\d.]+), "
    r"(?P<count>\d+), (?P<ms>\d+)(?P<progress> for share consumer)?"
)


def tool_time(text: str) -> float:
    """A timestamp of the perf tools' default --date-format, as epoch seconds (local time)."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S:%f").timestamp()


def perf_share_consumer(
    dist: KafkaDistribution, cluster: Cluster, topic: str, group: str, records: int, args: argparse.Namespace
) -> Measurement:
    """ShareConsumerPerformance with one consumer. Its summary is timed from subscribe to the last
    record; its progress lines (every 100 ms) tell when the first record came."""
    command = tool_command(
        dist,
        "ShareConsumerPerformance",
        *("--bootstrap-server", cluster.bootstrap, "--topic", topic, "--group", group),
        # --timeout also bounds the whole run (the tool interrupts its consumer thread after it)
        *("--num-records", str(records), "--threads", "1", "--timeout", str(int(args.max_seconds * 1000))),
        *("--show-detailed-stats", "--reporting-interval", "100"),
    )
    with CpuMeter(cluster.broker_pids) as cpu:
        started = time.monotonic()
        out = run_tool(command, timeout=args.max_seconds + 120)
        wall = time.monotonic() - started
    stats = [m for line in out.splitlines() if (m := SHARE_STATS.match(line.strip()))]
    progress = [m for m in stats if m["progress"]]
    summary = [m for m in stats if not m["progress"]]
    if not summary:
        raise SystemExit(f"no summary in ShareConsumerPerformance's output:\n{out}")
    total = summary[-1]
    count = int(total["count"])
    if count < records:
        raise SystemExit(f"ShareConsumerPerformance read only {count} of {records} records:\n{out}")
    first_at = tool_time(progress[0]["end"]) if progress else tool_time(total["start"])
    first_count = int(progress[0]["count"]) if progress else 0
    steady_s = tool_time(total["end"]) - first_at
    return Measurement(
        "share_consumer",
        KAFKA,
        count,
        int(total["ms"]) / 1000,
        float(total["rate"]),
        float(total["mb_rate"]),
        cpu.children,
        cpu.broker,
        (count - first_count) / steady_s if steady_s > 0 else None,
        {"first_record_after_s": round(first_at - tool_time(total["start"]), 3), "process_wall_s": round(wall, 3)},
        other_cpu_s=cpu.other,
    )


def dimster_share_consumer(
    cluster: Cluster,
    topic: str,
    group: str,
    records: int,
    args: argparse.Namespace,
    library: str,
    profile_out: Path | None = None,
) -> Measurement:
    """One ConsumerClient of `library` in a share group, from start (subscribe) until `records` were received."""
    workload = Workload.model_validate(
        {
            "name": "bench",
            "partitionsPerTopic": args.partitions,
            "messageSize": args.record_size,
            "clientLibrary": {"shareConsumer": library},
        }
    )
    consumer = spec(ConsumerSpec, consumer_id=0, topic=topic, group=group, kind="SHARE_GROUP")
    client = ConsumerClient(consumer, workload, cluster.bootstrap, 5)
    client.measure_from = 0.0  # no warm-up here: every record's latency is measured
    thread = instrument(client, profile_out)
    taken = taken_bytes = polls = 0
    first_at: float | None = None
    first_count = 0
    with CpuMeter(cluster.broker_pids) as cpu:
        started = time.time()
        client.start()
        next_take, last_progress, received, received_bytes = started + 1, started, 0, 0
        while client.thread.is_alive():
            time.sleep(0.005)
            now = time.time()
            with client.lock:
                now_received = taken + client.interval.received
                received_bytes = taken_bytes + client.interval.received_bytes
            if now_received > received:
                if first_at is None:
                    first_at, first_count = now, now_received
                received, last_progress = now_received, now
            if received >= records or now - last_progress > args.idle_seconds or now - started > args.max_seconds:
                break
            if now >= next_take:  # as the worker does, once a second
                interval = client.take_interval()
                taken, taken_bytes = taken + interval.received, taken_bytes + interval.received_bytes
                polls += interval.polls
                next_take += 1
        ended = time.time()
        stop(client)
    polls += client.take_interval().polls
    if client.error:
        raise SystemExit(f"the dimster {library} share consumer failed: {client.error}")
    if received < records:
        raise SystemExit(f"the dimster {library} share consumer received only {received} of {records} records")
    seconds, first_at = ended - started, first_at or started
    return Measurement(
        "share_consumer",
        dimster_side(library),
        received,
        seconds,
        received / seconds,
        received_bytes / MB / seconds,
        cpu.own,
        cpu.broker,
        (received - first_count) / (ended - first_at) if ended > first_at else None,
        {
            "first_record_after_s": round(first_at - started, 3),
            "records_per_poll": round(received / max(polls, 1), 1),
            **thread_cpu(thread, received, seconds),
        },
        other_cpu_s=cpu.other,
    )


# ---- the comparison ---------------------------------------------------------------------------------
def side_order(names: list[str], index: int) -> list[str]:
    """The sides in the order of round `index`: each side goes first in turn, the others following
    forwards in one cycle of rounds and backwards in the next (two sides simply alternate)."""
    first = index % len(names)
    order = names[first:] + names[:first]
    if (index // len(names)) % 2:
        order = [order[0], *reversed(order[1:])]
    return order


def alternate(index: int, args: argparse.Namespace, runs: dict[str, Callable[[], Measurement]]) -> list[Measurement]:
    """Every side once, in the order of round `index` (see side_order). A measurement during which
    the rest of the machine used more than --max-other-load cores is taken again (up to --retries
    times; the last one counts)."""
    results = []
    for side in side_order(list(runs), index):
        for attempt in range(args.retries + 1):
            wait_for_quiet(args)
            m = runs[side]()
            load = m.other_cpu_s / m.seconds
            if load <= args.max_other_load or attempt == args.retries:
                break
            log.info("  %s disturbed: the rest of the machine used %.2f cores meanwhile; again", m.side, load)
        m.extra["attempts"] = attempt + 1
        results.append(m)
    return results


def measure_producer(
    label: str, side: str, records: int, dist: KafkaDistribution, cluster: Cluster, args: argparse.Namespace
) -> Measurement:
    """One side's producer run against a fresh topic of `--partitions` partitions, deleted afterwards."""
    topic = f"bench-produce-{side}-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, args.partitions)
    try:
        if side == KAFKA:
            m = perf_producer(dist, cluster, topic, records, args)
        else:
            m = dimster_producer(cluster, topic, records, args, library_of(side))
    finally:
        delete_topic(cluster.bootstrap, topic)
    log.info("producer %s %-18s %s", label, m.side, brief(m))
    return m


def rounds(records: int, args: argparse.Namespace) -> list[tuple[str, int, int]]:
    """(label, records, order) of every round: an unreported warm-up round of `--warmup` of the
    records first, then the repetitions; `order` rotates which side goes first (see side_order)."""
    warmup = [("warm-up", max(1, int(records * args.warmup)), 1)] if args.warmup else []
    return warmup + [(f"{i + 1}/{args.repeat}", records, i) for i in range(args.repeat)]


def compare_producers(dist: KafkaDistribution, cluster: Cluster, args: argparse.Namespace) -> list[Measurement]:
    """Each round: every side on a fresh topic. The warm-up round warms the broker (JIT, page cache)
    and the Java clients in this process."""
    results = []
    for label, count, order in rounds(args.records, args):
        runs = {side: partial(measure_producer, label, side, count, dist, cluster, args) for side in side_names(args)}
        measured = alternate(order, args, runs)
        if label != "warm-up":
            results += measured
    return results


def measure_share_consumer(
    side: str, dist: KafkaDistribution, cluster: Cluster, topic: str, records: int, args: argparse.Namespace
) -> Measurement:
    """One side draining `topic` in a new share group that starts at the earliest offset."""
    group = f"bench-{side}-{uuid.uuid4().hex[:6]}"
    share_groups_from_earliest(cluster.bootstrap, [group])
    if side == KAFKA:
        return perf_share_consumer(dist, cluster, topic, group, records, args)
    return dimster_share_consumer(cluster, topic, group, records, args, library_of(side))


def compare_share_consumers(
    dist: KafkaDistribution, cluster: Cluster, args: argparse.Namespace
) -> tuple[list[Measurement], float]:
    """Pre-fill one topic, then drain it with a fresh share group per side and repetition, after a
    warm-up round that drains part of it (not reported: the first share group of a cluster also
    initializes the share-group state topic)."""
    records = args.share_records or args.records
    topic = f"bench-share-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, args.partitions)
    results = []
    try:
        log.info("pre-filling %s with %d records (%s) ...", topic, records, args.prefill)
        started = time.monotonic()
        prefill(dist, cluster, topic, records, args)
        prefill_s = time.monotonic() - started
        for label, count, order in rounds(records, args):
            runs = {
                side: partial(measure_share_consumer, side, dist, cluster, topic, count, args)
                for side in side_names(args)
            }
            for m in alternate(order, args, runs):
                log.info("share consumer %s %-18s %s", label, m.side, brief(m))
                if label != "warm-up":
                    results.append(m)
    finally:
        delete_topic(cluster.bootstrap, topic)
    return results, prefill_s


def brief(m: Measurement) -> str:
    return (
        f"{m.records:>9} records in {m.seconds:6.2f} s = {m.records_per_s:>9.0f} rec/s {m.mb_per_s:7.2f} MB/s, "
        f"cpu {m.cpu_s:5.1f} s, broker {m.broker_cpu_s:5.1f} s, others {m.other_cpu_s:5.1f} s"
        + (f", client thread {m.extra['thread_busy']:.0%} busy" if "thread_busy" in m.extra else "")
    )


def thread_summary(runs: list[Measurement]) -> dict:
    """dimster only: CPU of the client's own thread per record, and how busy it was."""
    if not all("thread_cpu_us_per_record" in m.extra for m in runs):
        return {}
    return {
        "thread_cpu_us_per_record": statistics.median(m.extra["thread_cpu_us_per_record"] for m in runs),
        "thread_busy": statistics.median(m.extra["thread_busy"] for m in runs),
    }


def side_summary(runs: list[Measurement]) -> dict:
    """The medians of one side's runs of one kind."""
    summary = {
        "records_per_s": statistics.median(m.records_per_s for m in runs),
        "mb_per_s": statistics.median(m.mb_per_s for m in runs),
        "cpu_us_per_record": statistics.median(m.cpu_s / m.records * 1e6 for m in runs),
        "broker_cpu_us_per_record": statistics.median(m.broker_cpu_s / m.records * 1e6 for m in runs),
        "other_cpu_s": [round(m.other_cpu_s, 1) for m in runs],
        **thread_summary(runs),
        "runs_records_per_s": [round(m.records_per_s) for m in runs],
    }
    steady = [m.steady_records_per_s for m in runs if m.steady_records_per_s]
    if steady:
        summary["steady_records_per_s"] = statistics.median(steady)
        summary["runs_steady_records_per_s"] = [round(r) for r in steady]
        summary["first_record_after_s"] = statistics.median(m.extra["first_record_after_s"] for m in runs)
    return summary


def side_ratios(side: dict, reference: dict) -> dict:
    """Ratios of one side's medians to a reference side's: rate, CPU per record, steady rate."""
    keys = ("records_per_s", "cpu_us_per_record", "steady_records_per_s")
    return {k: side[k] / reference[k] if reference[k] else None for k in keys if k in side and k in reference}


def summarize(results: list[Measurement], names: list[str]) -> dict:
    """Per kind: the medians of each side, and the ratios of the medians (see ratio_pairs)."""
    summary: dict = {}
    for kind in dict.fromkeys(m.kind for m in results):
        runs = {side: [m for m in results if m.kind == kind and m.side == side] for side in names}
        sides = {side: side_summary(measured) for side, measured in runs.items() if measured}
        ratios = {
            f"{side} / {reference}": side_ratios(sides[side], sides[reference])
            for side, reference in ratio_pairs(list(sides))
        }
        summary[kind] = {"sides": sides, "ratios": ratios}
    return summary


def print_table(summary: dict) -> None:
    """Per kind, a row per side and a row per ratio (its rate and CPU ratios in the same columns)."""
    print()
    print(
        f"{'':16}{'side':20}{'rec/s (median)':>16}{'MB/s':>9}{'process CPU µs/rec':>20}"
        f"{'thread µs/rec, busy':>22}  runs (rec/s)"
    )
    for kind, table in summary.items():
        sides, ratios = table["sides"], table["ratios"]
        for side, s in sides.items():
            runs = ", ".join(str(r) for r in s["runs_records_per_s"])
            thread = f"{s['thread_cpu_us_per_record']:.2f}, {s['thread_busy']:.0%}" if "thread_busy" in s else "-"
            print(
                f"{kind:16}{side:20}{s['records_per_s']:>16,.0f}{s['mb_per_s']:>9.1f}"
                f"{s['cpu_us_per_record']:>20.2f}{thread:>22}  {runs}"
            )
        for name, r in ratios.items():
            cpu = f"{r['cpu_us_per_record']:.2f}" if r.get("cpu_us_per_record") else "-"
            print(f"{kind:16}{'ratio':20}{r['records_per_s']:>16.2f}{'':9}{cpu:>20}{'':22}  {name}")
        if any("steady_records_per_s" in r for r in ratios.values()):
            print(f"{'':16}from the first record on (the group join left out):")
            for side, s in sides.items():
                if "steady_records_per_s" in s:
                    runs = ", ".join(str(r) for r in s["runs_steady_records_per_s"])
                    print(
                        f"{kind:16}{side:20}{s['steady_records_per_s']:>16,.0f}"
                        f"   first record after {s['first_record_after_s']:.2f} s; runs: {runs}"
                    )
            for name, r in ratios.items():
                if r.get("steady_records_per_s"):
                    print(f"{kind:16}{'ratio':20}{r['steady_records_per_s']:>16.2f}   {name}")
    print(
        "ratio rows: side / reference, of the records/s (rec/s column) and of the process CPU per record (CPU column)"
    )


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine() -> dict:
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.version(),
        "librdkafka": confluent_kafka.libversion()[0],
        "java": subprocess.run([java_executable(), "-version"], capture_output=True, text=True).stderr.splitlines()[0],
        "jpype": metadata.version("JPype1"),
    }


def libraries(text: str) -> list[str]:
    """--libraries: client libraries, comma-separated, each at most once."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    known = get_args(Library)
    if not names or len(set(names)) < len(names) or not set(names) <= set(known):
        raise argparse.ArgumentTypeError(f"a comma-separated list of {' and '.join(known)}, each at most once")
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--env", default=DEFAULT_ENV, help="environment to run on; made as a scratch project if missing")
    p.add_argument("--records", type=int, default=4_000_000, help="records per measurement")
    p.add_argument("--share-records", type=int, default=0, help="records to drain per share group (default: --records)")
    p.add_argument("--record-size", type=int, default=512, help="bytes per record value")
    p.add_argument("--partitions", type=int, default=6, help="partitions of every topic")
    p.add_argument("--repeat", type=int, default=3, help="repetitions per side; the median is reported")
    p.add_argument(
        "--libraries",
        type=libraries,
        default="librdkafka,java",
        help="the dimster client libraries (clientLibrary) to measure, each as its own side:\n"
        "dimster-librdkafka, dimster-java (Kafka's Java clients in this process)",
    )
    p.add_argument("--linger-ms", type=int, default=5, help="producer linger.ms (every side)")
    p.add_argument("--batch-size", type=int, default=65536, help="producer batch.size (every side)")
    p.add_argument(
        "--idempotence",
        choices=("true", "false"),
        default="true",
        help="producer enable.idempotence (every side; the Java default with acks=all)",
    )
    p.add_argument(
        "--prefill",
        choices=("kafka", "dimster"),
        default="kafka",
        help="who writes the share-consumer topic: ProducerPerformance (values without dimster's header)\n"
        "or a dimster librdkafka producer (values with it, as in a dimster run)",
    )
    p.add_argument(
        "--warmup",
        type=float,
        default=0.1,
        help="before the measured repetitions, one unreported round of this fraction of the records (0: none)",
    )
    p.add_argument("--only", choices=("producer", "share"), help="run one comparison only")
    p.add_argument("--max-seconds", type=float, default=120, help="time limit of one measurement")
    p.add_argument(
        "--idle-seconds", type=float, default=10, help="the dimster consumer gives up after this long without records"
    )
    p.add_argument("--pause", type=float, default=2, help="seconds between measurements (lets the broker settle)")
    p.add_argument(
        "--quiet-below",
        type=float,
        default=0.3,
        help="before each measurement, wait until the machine's CPU use is below this fraction (shared hosts)",
    )
    p.add_argument("--quiet-wait", type=float, default=60, help="wait at most this long for --quiet-below")
    p.add_argument(
        "--max-other-load",
        type=float,
        default=0.25,
        help="a measurement during which other processes used more cores than this is taken again",
    )
    p.add_argument("--retries", type=int, default=2, help="how often a disturbed measurement is taken again")
    p.add_argument("--json-out", type=Path, help="also write every measurement and the summary as JSON here")
    p.add_argument(
        "--profile-dir",
        type=Path,
        help="instead of comparing: run each dimster client of each --libraries once under cProfile,\n"
        "write <producer|share_consumer>-<library>.prof here",
    )
    args = p.parse_args(argv)
    if args.record_size < 23:
        p.error("--record-size must be at least 23 (dimster's header)")
    return args


def profile_dimster(cluster: Cluster, args: argparse.Namespace) -> None:
    """Per library, one profiled run of each dimster client (cProfile in the client's thread; the
    share consumer drains what the producer wrote). cProfile does not list JPype's calls into Java:
    for java, the time spent in the JVM is the own time of the Python method that calls it (e.g.
    JavaProducer.send)."""
    args.profile_dir.mkdir(parents=True, exist_ok=True)
    for library in args.libraries:
        topic = f"bench-profile-{library}-{uuid.uuid4().hex[:6]}"
        create_topic(cluster.bootstrap, topic, args.partitions)
        try:
            out = args.profile_dir / f"producer-{library}.prof"
            m = dimster_producer(cluster, topic, args.records, args, library, out)
            log.info("producer %s (profiled) %s -> %s", library, brief(m), out)
            group = f"bench-profile-{uuid.uuid4().hex[:6]}"
            share_groups_from_earliest(cluster.bootstrap, [group])
            out = args.profile_dir / f"share_consumer-{library}.prof"
            records = min(args.share_records or args.records, args.records)
            m = dimster_share_consumer(cluster, topic, group, records, args, library, out)
            log.info("share consumer %s (profiled) %s -> %s", library, brief(m), out)
        finally:
            delete_topic(cluster.bootstrap, topic)


def java_clients(cluster: Cluster, args: argparse.Namespace) -> None:
    """Start this process's JVM for the Java clients now, so that no measurement includes its start-up."""
    if "java" in args.libraries:
        started = time.monotonic()
        start_jvm(cluster.kafka_version)
        log.info(
            "JVM for the Java clients of Kafka %s started in %.1f s", cluster.kafka_version, time.monotonic() - started
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    with bench_cluster(args.env) as cluster:
        dist = kafka_distribution(cluster.kafka_version)
        if not dist.has_perf_tools:
            raise SystemExit(f"Kafka {dist.version} has no kafka-tools jar (perf tools); use another kafkaVersion")
        java_clients(cluster, args)
        if args.profile_dir:
            profile_dimster(cluster, args)
            return
        log.info("cluster '%s' at %s, Kafka %s", cluster.env, cluster.bootstrap, cluster.kafka_version)
        results: list[Measurement] = []
        prefill_s = None
        if args.only in (None, "producer"):
            results += compare_producers(dist, cluster, args)
        if args.only in (None, "share"):
            share, prefill_s = compare_share_consumers(dist, cluster, args)
            results += share
    summary = summarize(results, side_names(args))
    print_table(summary)
    if args.json_out:
        report = {
            "machine": machine(),
            "kafka_version": cluster.kafka_version,
            "environment": cluster.env,
            "sides": side_names(args),
            "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "producer_config": producer_properties(args),
            "prefill_seconds": prefill_s,
            "summary": summary,
            "measurements": [asdict(m) for m in results],
        }
        args.json_out.write_text(json.dumps(report, indent=2) + "\n")
        log.info("wrote %s", args.json_out)


if __name__ == "__main__":
    main()
