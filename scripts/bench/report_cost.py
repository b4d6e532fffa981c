"""What one worker report of many share consumers costs: taking every client's interval (its
histograms counted, its settled sequence numbers turned into ranges) and encoding the report, on the
worker; decoding it, on the coordinator. The intervals look like those of the reference workload's
300 share consumers at a few thousand msg/s: a few records per consumer per second, 6 partitions.

    .venv/bin/python scripts/bench/report_cost.py [--clients 300] [--repeat 15]

Prints the best of the repeats for each step in milliseconds and the report's size in bytes.
"""

import argparse
import time

import numpy as np

from dimster.metrics.histogram import Histogram
from dimster.metrics.sequences import to_ranges
from dimster.worker.protocol import ClientInterval, IntervalReport, Report, decode, encode

PARTITIONS = 6
RECORDS = 7  # per consumer per second: 2,000 msg/s over 300 consumers


def pending_state(clients: int, rng: np.random.Generator) -> list[tuple[ClientInterval, dict, dict]]:
    """Each client's interval as it stands before it is taken: counts, histograms and sequence numbers."""
    state = []
    for i in range(clients):
        interval = ClientInterval(f"c{i}", "share_consumer", "t0", "g0", library="java", generation=1)
        interval.received = interval.accepted = RECORDS
        interval.polls, interval.received_bytes, interval.max_poll_records = 5, RECORDS * 500, 3
        interval.delivery_counts = {1: RECORDS}
        histograms = {}
        for partition in range(PARTITIONS):
            histogram = Histogram()
            histogram.record_array(rng.lognormal(8, 1.5, 2))
            histograms[("e2e", partition)] = histogram
        sequences = {pid: sorted(rng.integers(0, 10**6, 4).tolist()) for pid in (0, 1)}
        state.append((interval, histograms, sequences))
    return state


def take(state) -> list[ClientInterval]:
    """What LoadClient.take_interval and ConsumerClient.take_interval do with it."""
    taken = []
    for interval, histograms, sequences in state:
        interval.histograms = {key: h.to_wire() for key, h in histograms.items() if h.total or h._filled}
        interval.settled = {pid: to_ranges(found) for pid, found in sequences.items()}
        taken.append(interval)
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    best = {"take": float("inf"), "encode": float("inf"), "decode": float("inf")}
    size = 0
    for _ in range(args.repeat):
        state = pending_state(args.clients, rng)
        started = time.perf_counter()
        intervals = take(state)
        taken = time.perf_counter()
        data = encode(Report(IntervalReport(0, time.time(), intervals, 1.0, 1, 1)))
        encoded = time.perf_counter()
        decode(data)
        decoded = time.perf_counter()
        size = len(data)
        for step, seconds in (("take", taken - started), ("encode", encoded - taken), ("decode", decoded - encoded)):
            best[step] = min(best[step], seconds)
    steps = ", ".join(f"{step} {seconds * 1000:.1f} ms" for step, seconds in best.items())
    print(f"{args.clients} share consumers' report: {steps}; {size:,} bytes")


if __name__ == "__main__":
    main()
