"""A worker's memory over a long share-group run, in compressed time: share consumers
(dimster/worker/clients/consumer.py) account for their polls as their threads do (the records, then
the broker's answers to their acknowledgements), 5 % of the records rejected and 5 % released on
delivery 1 and received again on delivery 2 a simulated second later, and the worker takes each
consumer's interval every simulated second and encodes the report, as it reports. No Kafka: polls are
built from dimster's headers and every acknowledgement is answered as taken effect. Prints the
process's resident memory after each simulated minute, with the records accounted for.

    .venv/bin/python scripts/bench/worker_memory.py [--minutes 30] [--rate 50000] [--consumers 8]
        [--poll 500] [--json-out F]
"""

import argparse
import json
import time

import numpy as np
import psutil
from poll_accounting import answers_to

from dimster.clients import ACCEPT, REJECT, RELEASE, Polled
from dimster.worker.clients import ConsumerClient
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ConsumerSpec, Reported, encode, worker_report
from dimster.workload.model import Workload
from dimster.workload.payload import pack_header

PARTITIONS = 6


def a_consumer(index: int, reject: float, release: float) -> ConsumerClient:
    """A share consumer that never connects, explicit acknowledgement, in the measured phase."""
    acknowledgement = {"mode": "EXPLICIT", "rejectFraction": reject, "releaseFraction": release}
    workload = Workload.model_validate(
        {"name": "bench", "consumerType": "SHARE_GROUP", "acknowledgement": acknowledgement}
    )
    client = ConsumerClient(ConsumerSpec(index, "t", "g", "SHARE_GROUP"), workload, "127.0.0.1:1", 5)
    client.measure_from = 0.0
    return client


def a_poll(producer: int, sequences: np.ndarray, delivery: int, first_offset: int) -> Polled:
    now = time.time_ns()
    count = len(sequences)
    return Polled(
        partitions=(sequences % PARTITIONS).astype(np.int32),
        delivery_counts=np.full(count, delivery, dtype=np.int32),
        headers=b"".join(pack_header(producer, int(s), now) for s in sequences),
        value_bytes=100 * count,
        offsets=np.arange(first_offset, first_offset + count, dtype=np.int64),
    )


def account(client: ConsumerClient, poll: Polled, outcomes: np.ndarray) -> None:
    """One poll as the consumer's thread takes it: its records, then the answers to their acknowledgement."""
    client._record(poll, outcomes)
    client._answered(answers_to(poll))


class Simulation:
    """`consumers` share consumers taking `rate` records/s in all in polls of `poll`, consumer i
    producer i's records; `reject` and `release` shares on delivery 1, the released back on delivery 2
    the next second."""

    def __init__(self, consumers: int, rate: int, poll: int, reject: float, release: float):
        self.clients = [a_consumer(i, reject, release) for i in range(consumers)]
        self.per_consumer, self.poll, self.reject, self.release = rate // consumers, poll, reject, release
        self.rng = np.random.default_rng(1)
        self.next_sequence = [0] * consumers
        self.again: list[np.ndarray] = [np.empty(0, np.int64) for _ in self.clients]  # released: back next second
        self.offsets = [0] * consumers
        self.received = 0

    def second(self) -> bytes:
        """A simulated second of polls, then the worker's report of it (encoded)."""
        for i in range(len(self.clients)):
            if len(self.again[i]):
                self._take(i, self.again[i], 2, np.full(len(self.again[i]), ACCEPT, np.int8))
            released = []
            for first in range(self.next_sequence[i], self.next_sequence[i] + self.per_consumer, self.poll):
                sequences = np.arange(first, min(first + self.poll, self.next_sequence[i] + self.per_consumer))
                draws = self.rng.random(len(sequences))
                outcomes = np.full(len(sequences), ACCEPT, np.int8)
                outcomes[draws < self.reject + self.release] = REJECT
                outcomes[draws < self.release] = RELEASE
                self._take(i, sequences, 1, outcomes)
                released.append(sequences[outcomes == RELEASE])
            self.next_sequence[i] += self.per_consumer
            self.again[i] = np.concatenate(released) if released else np.empty(0, np.int64)
        taken = [client.take_interval() for client in self.clients]
        histograms = HistogramColumns.gather(h for _, h in taken)
        return encode(Reported(worker_report(0, time.time(), [c for c, _ in taken], histograms=histograms)))

    def _take(self, i: int, sequences: np.ndarray, delivery: int, outcomes: np.ndarray) -> None:
        account(self.clients[i], a_poll(i, sequences, delivery, self.offsets[i]), outcomes)
        self.offsets[i] += len(sequences)
        self.received += len(sequences)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=30, help="simulated minutes")
    parser.add_argument("--rate", type=int, default=50_000, help="records/s in all")
    parser.add_argument("--consumers", type=int, default=8)
    parser.add_argument("--poll", type=int, default=500, help="records a poll")
    parser.add_argument("--reject", type=float, default=0.05)
    parser.add_argument("--release", type=float, default=0.05)
    parser.add_argument("--json-out")
    args = parser.parse_args()
    run = Simulation(args.consumers, args.rate, args.poll, args.reject, args.release)
    me, curve, started = psutil.Process(), [], time.process_time()
    print(f"minute 0: RSS {me.memory_info().rss / 2**20:,.0f} MB", flush=True)
    for minute in range(1, args.minutes + 1):
        for _second in range(60):
            run.second()
        rss = me.memory_info().rss
        curve.append({"minute": minute, "rss_mb": round(rss / 2**20), "received": run.received})
        cpu = time.process_time() - started
        print(
            f"minute {minute}: RSS {rss / 2**20:,.0f} MB, {run.received:,} records received, CPU {cpu:.0f} s",
            flush=True,
        )
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump({"args": vars(args), "curve": curve}, out, indent=1)


if __name__ == "__main__":
    main()
