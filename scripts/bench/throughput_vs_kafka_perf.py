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
import json
import logging
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import get_args

from perf_cluster import DEFAULT_ENV, Cluster, bench_cluster, create_topic, delete_topic, share_groups_from_earliest
from perf_dimster import dimster_producer, dimster_share_consumer
from perf_measure import Measurement, producer_properties
from perf_report import brief, machine, print_table, summarize
from perf_side_by_side import compare_producers, compare_share_consumers, side_names

from dimster.clients.jvm import start_jvm
from dimster.errors import DimsterError
from dimster.kafka.distribution import kafka_distribution
from dimster.workload.clients import Library

log = logging.getLogger("bench")


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
        create_topic(cluster, topic, args.partitions)
        try:
            out = args.profile_dir / f"producer-{library}.prof"
            m = dimster_producer(cluster, topic, args.records, args, library, out)
            log.info("producer %s (profiled) %s -> %s", library, brief(m), out)
            group = f"bench-profile-{uuid.uuid4().hex[:6]}"
            share_groups_from_earliest(cluster, [group])
            out = args.profile_dir / f"share_consumer-{library}.prof"
            records = min(args.share_records or args.records, args.records)
            m = dimster_share_consumer(cluster, topic, group, records, args, library, out)
            log.info("share consumer %s (profiled) %s -> %s", library, brief(m), out)
        finally:
            delete_topic(cluster, topic)


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
    try:
        compare(args)
    except DimsterError as e:  # the cluster refused or did not answer a topic or group request: one line
        raise SystemExit(str(e)) from None


def compare(args: argparse.Namespace) -> None:
    """Measure every side on the cluster of --env (or profile the dimster clients), then report."""
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
