"""dimster's side of throughput_vs_kafka_perf.py: one ProducerClient or one share-group ConsumerClient
of a client library in this process, driven as a worker drives it, with its own thread's CPU time
(and a cProfile of that thread if asked)."""

from __future__ import annotations

import argparse
import cProfile
import time
from dataclasses import fields
from pathlib import Path
from typing import TypeVar

from perf_cluster import Cluster
from perf_measure import MB, CpuMeter, Measurement, dimster_side, producer_properties

from dimster.worker.clients import ConsumerClient, LoadClient, ProducerClient
from dimster.worker.protocol import ConsumerSpec, ProducerSpec
from dimster.workload.model import Workload

T = TypeVar("T")


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
                interval, _ = client.take_interval()
                acked, errors = acked + interval.acked, errors + interval.send_errors
                next_take += 1
        stop(client)
        seconds = time.time() - started
    interval, _ = client.take_interval()
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
                interval, _ = client.take_interval()
                taken, taken_bytes = taken + interval.received, taken_bytes + interval.received_bytes
                polls += interval.polls
                next_take += 1
        ended = time.time()
        stop(client)
    polls += client.take_interval()[0].polls
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
