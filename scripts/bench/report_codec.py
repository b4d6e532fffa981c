"""A worker report's cost at each step the coordinator takes it through, per report of 30 clients.

Three reports: the coordinator-scale benchmark's (15 producers with a publish-delay histogram, 15
share consumers with two partitions' e2e histograms and one settled range, 10 records/s each); the
same with 5 % of the consumers' records rejected at random (400 scattered settled ranges a consumer,
200 rejected ones), each consumer still settling one producer's records; and "one group" as a broker
serves a share group (each producer's 100 records of the second in batches of 10 to any consumer, 5 %
rejected), so each consumer settles records of most producers. Per report: its size, the worker's
merge of its consumers' ranges per group (protocol 19), its encoding on the worker, its decoding on
the coordinator, then the loop's steps (the journal, the aggregate, the metrics writer's rows) and the
writer thread's Parquet part. Each report is decoded and taken in one at a time, as the loop does.

    .venv/bin/python scripts/bench/report_codec.py [--reports 300] [--repeat 5] [--aggregate-only]

Each figure is the median of `--repeat` rounds (a fresh aggregate, journal and writer each).
`--aggregate-only`: the aggregate alone, each round's reports decoded before it, in CPU time; the
least of `--repeat` rounds (on a noisy host the least is the figure that repeats).
"""

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.journal import RunJournal
from dimster.metrics.histogram import Histogram
from dimster.metrics.sequences import to_ranges
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.client_columns import take_accounts
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import (
    PROTOCOL_VERSION,
    ClientInterval,
    IntervalReport,
    Reported,
    decode,
    encode,
    worker_report,
)


def histogram(values: int, around_us: float) -> tuple:
    h = Histogram()
    for _ in range(values):
        h.record(around_us * (1 + random.random()))
    return h.to_wire()


def scale_clients(k: int) -> list[ClientInterval]:
    clients = [
        ClientInterval(
            f"p{p}", "producer", "t", library="librdkafka", generation=1, target_rate=10.0, sent=10,
            sent_bytes=10240, acked=10, next_sequence=10 * k,
        )
        for p in range(15)
    ]  # fmt: skip
    clients += [
        ClientInterval(
            f"c{c}", "share_consumer", "t", "g", library="librdkafka", generation=1, received=10,
            received_bytes=10240, accepted=10, polls=3, max_poll_records=4, max_poll_partitions=1,
            delivery_counts={1: 10},
            settled={c: [(10 * k, 10 * k + 9)]}, first_received_at=1.0, last_received_at=2.0,
        )
        for c in range(15)
    ]  # fmt: skip
    return clients


def with_latencies(k: int, clients: list[ClientInterval]) -> IntervalReport:
    """The report a worker makes of its clients' intervals (their ranges merged per group on the way)."""
    latencies = [{("publish", -1): histogram(10, 200)} for _ in range(15)]
    latencies += [{("e2e", p): histogram(5, 5000) for p in (0, 1)} for _ in range(15)]
    histograms = HistogramColumns.gather(latencies)
    return worker_report(0, 100.0 + k, clients, cpu_seconds=0.05, rss_bytes=1, threads=9, histograms=histograms)


def rejecting_clients(k: int) -> list[ClientInterval]:
    clients = scale_clients(k)
    for c in clients[15:]:
        producer = next(iter(c.settled))
        sequences = sorted(random.sample(range(10_000 * k, 10_000 * (k + 1)), 400))
        c.settled = {producer: [(s, s) for s in sequences]}
        c.settled_rejected = {(producer, 1): [(s, s) for s in sequences[:200]]}
    return clients


def shared_clients(k: int) -> list[ClientInterval]:
    """One share group as a broker serves it: each producer's 100 records of the second go out in
    batches of 10 to any of the 15 consumers, one record in 20 rejected, so a consumer settles
    records of most producers and each producer's records are spread over most consumers."""
    rng = random.Random(k)
    clients = scale_clients(k)
    consumers = clients[15:]
    taken: dict[int, dict[int, list[int]]] = {c: {} for c in range(15)}
    for producer in range(15):
        for batch in range(10):
            taken[rng.randrange(15)].setdefault(producer, []).append(100 * k + 10 * batch)
    for c, by_producer in zip(consumers, taken.values(), strict=True):
        c.settled, c.settled_rejected = {}, {}
        for producer, firsts in by_producer.items():
            c.settled[producer] = to_ranges([s for first in firsts for s in range(first, first + 10)])
            rejected = [first + 3 for first in firsts if rng.random() < 0.5]
            if rejected:
                c.settled_rejected[(producer, 1)] = to_ranges(rejected)
        c.received = c.accepted = sum(last - first + 1 for ranges in c.settled.values() for first, last in ranges)
    return clients


def merge_us(make, reports: int) -> float:
    """The worker's merge of its consumers' ranges per group (worker/accounts.py), µs a report."""
    intervals = [make(k) for k in range(reports)]
    started = time.process_time()
    for clients in intervals:
        take_accounts(clients)
    return 1e6 * (time.process_time() - started) / reports


def measure(make, reports: int) -> dict:
    merge = merge_us(make, reports)
    made = [with_latencies(k, make(k)) for k in range(reports)]
    started = time.perf_counter()
    datas = [encode(Reported(r)) for r in made]
    encode_us = 1e6 * (time.perf_counter() - started) / reports
    made_first = made[0]
    del made
    folder = Path(tempfile.mkdtemp(prefix="dimster-report-codec-"))
    journal, aggregate = RunJournal(folder), RunAggregate({"g": "t"})
    aggregate.load_started = 99.0
    warm = MetricsWriter(folder / "warm-up", 99.0)  # Arrow's first conversions load its code: not a part's cost
    warm.add(made_first, "measure")
    warm.flush()
    writer = MetricsWriter(folder / "metrics", 99.0)
    spent = dict.fromkeys(("decode", "journal", "aggregate", "metrics rows"), 0.0)
    for data in datas:
        t0 = time.perf_counter()
        message = decode(data)
        report = message.report  # type: ignore[attr-defined]
        t1 = time.perf_counter()
        journal.report(report, "measure", 0, message.received)  # type: ignore[attr-defined]
        t2 = time.perf_counter()
        aggregate.add(report)
        t3 = time.perf_counter()
        writer.add(report, "measure")
        t4 = time.perf_counter()
        for step, took in zip(spent, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            spent[step] += took
    started = time.perf_counter()
    writer.flush()
    part_us = 1e6 * (time.perf_counter() - started) / reports
    journal.remove()
    shutil.rmtree(folder)  # the journal, the warm-up part and the metrics parts
    per_report = {step: round(1e6 * took / reports) for step, took in spent.items()}
    made_here = {"merge (worker)": round(merge), "encode": round(encode_us)}
    return {"bytes": sum(map(len, datas)) // reports, **made_here, **per_report, "part": round(part_us)}


def aggregate_only(make, reports: int, rounds: int) -> int:
    datas = [encode(Reported(with_latencies(k, make(k)))) for k in range(1, reports + 1)]
    least = float("inf")
    for _ in range(rounds):
        decoded = [decode(data).report for data in datas]  # type: ignore[attr-defined]
        aggregate = RunAggregate({"g": "t"})
        aggregate.load_started = 0.5
        started = time.process_time()
        for report in decoded:
            aggregate.add(report)
        least = min(least, (time.process_time() - started) / reports)
    return round(least * 1e6)


SHAPES = (("scale", scale_clients), ("5 % rejects", rejecting_clients), ("one group", shared_clients))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--aggregate-only", action="store_true", help="the aggregate alone: least of --repeat")
    args = parser.parse_args()
    random.seed(1)
    if args.aggregate_only:
        for name, make in SHAPES:
            print(
                f"{name:>12}: aggregate {aggregate_only(make, args.reports, args.repeat):,} µs (CPU, least of rounds)"
            )
        return
    print(f"protocol {PROTOCOL_VERSION}, µs per report of 30 clients ({args.reports} reports, median of {args.repeat})")
    print_shapes(measure, args.reports, args.repeat)


def print_shapes(measure, reports: int, repeat: int) -> None:
    """Each shape's figures from `measure(make, reports)`, the median of `repeat` rounds, a line each."""
    for name, make in SHAPES:
        rounds = [measure(make, reports) for _ in range(repeat)]
        row = {step: round(statistics.median(r[step] for r in rounds)) for step in rounds[0]}
        print(f"{name:>12}: " + ", ".join(f"{k} {v:,}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
