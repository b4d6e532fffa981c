"""What a consumer's accounting of one poll costs on its thread, with the GIL held: the broker's
answers to the acknowledgements the poll carried, which settle the previous poll's records
(`ConsumerClient._answered`), then the poll's own records: counts, delivery counts, end-to-end
latencies per partition, kept until answered (`ConsumerClient._record`). With hundreds of consumers
in one worker their polls are small, and this fixed cost per poll is what they share the worker's
GIL for. No Kafka is involved: polls are built from dimster's headers, and every acknowledgement is
answered as taken effect.

    .venv/bin/python scripts/bench/poll_accounting.py [--sizes 1,3,30,500] [--repeat 7]

Prints, per poll size (records from two producers over 6 partitions), the best of the repeats in
microseconds per poll.
"""

import argparse
import functools
import time
import timeit

import numpy as np

from dimster.clients import SETTLED, Answers, Polled, record_keys
from dimster.worker.clients import ConsumerClient
from dimster.worker.protocol import ConsumerSpec
from dimster.workload.model import Workload
from dimster.workload.payload import pack_header

PARTITIONS = 6
POLLS_PER_REPEAT = 1000


def a_poll(size: int) -> Polled:
    now = time.time_ns()
    return Polled(
        partitions=np.arange(size, dtype=np.int32) % PARTITIONS,
        delivery_counts=np.ones(size, dtype=np.int32),
        headers=b"".join(pack_header(i % 2, i, now) for i in range(size)),
        value_bytes=500 * size,
        offsets=np.arange(size, dtype=np.int64),
    )


def answers_to(poll: Polled) -> Answers:
    """The broker's answers to the acknowledgement of every record of `poll`: all took effect."""
    keys = record_keys(poll)
    return Answers(keys, np.full(len(keys), SETTLED, np.int8))


def account(client: ConsumerClient, poll: Polled, answers: Answers) -> None:
    """One poll as a share consumer's thread accounts for it: the answers it brought (to the
    acknowledgement of the previous poll, the same records here), then its own records."""
    client._answered(answers)
    client._record(poll, None)


def a_client(consumer_id: int = 0) -> ConsumerClient:
    """A share consumer that never connects, in the measured phase: every record counts."""
    workload = Workload.model_validate({"name": "bench", "consumerType": "SHARE_GROUP"})
    client = ConsumerClient(ConsumerSpec(consumer_id, "t0", "g0", "SHARE_GROUP"), workload, "127.0.0.1:1", 5)
    client.measure_from = 0.0
    return client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,3,30,500", help="records per poll, comma-separated")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    client = a_client()
    for size in (int(s) for s in args.sizes.split(",")):
        poll = a_poll(size)
        one_poll = functools.partial(account, client, poll, answers_to(poll))
        runs = timeit.repeat(one_poll, number=POLLS_PER_REPEAT, repeat=args.repeat)
        client.take_interval()
        print(f"{size:>5} records per poll: {min(runs) / POLLS_PER_REPEAT * 1e6:7.1f} µs")


if __name__ == "__main__":
    main()
