"""What one worker report of many share consumers costs: taking every client's interval (its
histograms counted, its settled sequence numbers turned into ranges) and encoding the report, on the
worker; reading its kind, on an agent that relays it as it came (it decoded and encoded it again
before); decoding it, on the coordinator. Real `ConsumerClient`s account for synthetic polls as the
reference workload's 300 share consumers get them at a few thousand msg/s: a few records per
consumer per second over 6 partitions. No Kafka is involved.

    .venv/bin/python scripts/bench/report_cost.py [--clients 300] [--repeat 15]

Prints the best of the repeats for each step in milliseconds and the report's size in bytes.
"""

import argparse
import time

import numpy as np
from poll_accounting import answers_to

from dimster.clients import Polled
from dimster.worker.clients import ConsumerClient
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ConsumerSpec, Reported, decode, encode, kind_of, worker_report
from dimster.workload.model import Workload
from dimster.workload.payload import pack_header

PARTITIONS = 6
POLLS, RECORDS_PER_POLL = 3, 2  # about 7 records per consumer per second: 2,000 msg/s over 300 consumers


def share_consumers(count: int) -> list[ConsumerClient]:
    workload = Workload.model_validate({"name": "bench", "consumerType": "SHARE_GROUP"})
    spec = lambda i: ConsumerSpec(i, "t0", "g0", "SHARE_GROUP")  # noqa: E731
    clients = [ConsumerClient(spec(i), workload, "127.0.0.1:1", delivery_count_limit=5) for i in range(count)]
    for client in clients:
        client.measure_from = 0.0  # load started: the polls' records are of the measured phase
    return clients


def a_poll(rng: np.random.Generator) -> Polled:
    """A poll of a few records of two producers, sent up to a second ago, on random partitions."""
    now = time.time_ns()
    records = [
        (int(rng.integers(2)), int(rng.integers(10**6)), now - int(rng.integers(10**9)))
        for _ in range(RECORDS_PER_POLL)
    ]
    return Polled(
        partitions=rng.integers(PARTITIONS, size=RECORDS_PER_POLL).astype(np.int32),
        delivery_counts=np.ones(RECORDS_PER_POLL, dtype=np.int32),
        headers=b"".join(pack_header(*record) for record in records),
        value_bytes=500 * RECORDS_PER_POLL,
        offsets=rng.integers(2**40, size=RECORDS_PER_POLL),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    clients = share_consumers(args.clients)
    best = {"take": float("inf"), "encode": float("inf"), "relay": float("inf"), "decode": float("inf")}
    size = 0
    for _ in range(args.repeat):
        for client in clients:  # a second's polls, accounted as the consumer's thread does
            for _ in range(POLLS):
                poll = a_poll(rng)
                client._record(poll, None)
                client._answered(answers_to(poll))  # settled: the broker answered its acknowledgement
        started = time.perf_counter()
        intervals = [client.take_interval() for client in clients]
        histograms = HistogramColumns.gather(h for _, h in intervals)
        taken = time.perf_counter()
        report = worker_report(0, time.time(), [c for c, _ in intervals], 1.0, 1, 1, histograms=histograms)
        data = encode(Reported(report))
        encoded = time.perf_counter()
        kind_of(data)
        relayed = time.perf_counter()
        decode(data)
        decoded = time.perf_counter()
        size = len(data)
        steps = (("take", taken - started), ("encode", encoded - taken), ("relay", relayed - encoded),
                 ("decode", decoded - relayed))  # fmt: skip
        for step, seconds in steps:
            best[step] = min(best[step], seconds)
    steps = ", ".join(f"{step} {seconds * 1000:.2f} ms" for step, seconds in best.items())
    print(f"{args.clients} share consumers' report: {steps}; {size:,} bytes")


if __name__ == "__main__":
    main()
