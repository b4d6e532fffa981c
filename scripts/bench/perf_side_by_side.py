"""The side-by-side driver of throughput_vs_kafka_perf.py: rounds in which every side (Kafka's tool,
then one dimster client per library) runs once, in a rotating order, each on a quiet machine and on
a fresh topic or share group; a measurement the rest of the machine disturbed is taken again."""

from __future__ import annotations

import argparse
import logging
import time
import uuid
from collections.abc import Callable
from functools import partial

import psutil
from perf_cluster import Cluster, create_topic, delete_topic, share_groups_from_earliest
from perf_dimster import dimster_producer, dimster_share_consumer
from perf_measure import KAFKA, Measurement, dimster_side, library_of
from perf_report import brief
from perf_tools import perf_producer, perf_share_consumer

from dimster.kafka.distribution import KafkaDistribution

log = logging.getLogger("bench")


def side_names(args: argparse.Namespace) -> list[str]:
    """Every measured side: Kafka's tool, then one dimster side per --libraries."""
    return [KAFKA, *(dimster_side(library) for library in args.libraries)]


def wait_for_quiet(args: argparse.Namespace) -> None:
    """Pause, then wait (at most --quiet-wait s) until the machine's CPU use drops below --quiet-below."""
    time.sleep(args.pause)
    deadline = time.monotonic() + args.quiet_wait
    while (busy := psutil.cpu_percent(interval=1.0)) > args.quiet_below * 100:
        if time.monotonic() > deadline:
            log.info("the machine is still %.0f%% busy; measuring anyway", busy)
            return


def prefill(dist: KafkaDistribution, cluster: Cluster, topic: str, records: int, args: argparse.Namespace) -> None:
    """Write `records` records of `--record-size` into `topic`, by ProducerPerformance or a dimster
    producer (librdkafka: only the values matter)."""
    if args.prefill == "kafka":
        perf_producer(dist, cluster, topic, records, args)
        return
    done = dimster_producer(cluster, topic, records, args, "librdkafka")
    if done.records < records:
        raise SystemExit(f"pre-filling {topic}: only {done.records} of {records} records were acked")


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
    create_topic(cluster, topic, args.partitions)
    try:
        if side == KAFKA:
            m = perf_producer(dist, cluster, topic, records, args)
        else:
            m = dimster_producer(cluster, topic, records, args, library_of(side))
    finally:
        delete_topic(cluster, topic)
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
    share_groups_from_earliest(cluster, [group])
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
    create_topic(cluster, topic, args.partitions)
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
        delete_topic(cluster, topic)
    return results, prefill_s
