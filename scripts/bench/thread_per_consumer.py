"""Does a thread per consumer limit a worker? Each consumer of a worker has a thread of its own that
blocks in its client's poll and its processing time (the GIL released), then accounts for the poll
(the GIL held). This bench runs that cycle without Kafka for N consumers in two ways and compares:
- threads: one thread per consumer, as dimster runs them;
- pool: the same N consumers served by a few threads from one queue of due times, the alternative
  (a consumer is due when its processing time ends; a free pool thread accounts for it).
The accounting is dimster's own (poll_accounting.account on a poll of 3 records, one client per
consumer); each cycle's block is the processing time of its records. Per case it prints the polls
accounted per second, the share of what one thread doing nothing but the accounting reaches (the
GIL's capacity), and how late a consumer's accounting starts after its block ends, p50 and p99.

    .venv/bin/python scripts/bench/thread_per_consumer.py [--consumers 30,100,300] [--pool 1,4] [--seconds 5]
"""

import argparse
import heapq
import threading
import time

import numpy as np
from poll_accounting import a_client, a_poll, account, answers_to

from dimster.worker.clients import ConsumerClient

RECORDS_PER_POLL = 3
PROCESSING_S = 0.005 * RECORDS_PER_POLL  # the reference workload: 5 ms per record


def consumers(count: int) -> list[ConsumerClient]:
    return [a_client(i) for i in range(count)]


def capacity(seconds: float) -> float:
    """Polls a second one thread accounts for back to back: what the GIL allows at most."""
    [client] = consumers(1)
    poll, done, end = a_poll(RECORDS_PER_POLL), 0, time.monotonic() + seconds
    answers = answers_to(poll)
    while time.monotonic() < end:
        account(client, poll, answers)
        done += 1
    return done / seconds


def with_threads(count: int, seconds: float) -> tuple[int, list[float]]:
    clients, poll = consumers(count), a_poll(RECORDS_PER_POLL)
    answers = answers_to(poll)
    lateness: list[list[float]] = [[] for _ in clients]
    end = time.monotonic() + seconds

    def consume(client: ConsumerClient, late: list[float]) -> None:
        while True:
            due = time.monotonic() + PROCESSING_S
            time.sleep(PROCESSING_S)  # the poll and the processing: the GIL released
            now = time.monotonic()
            if now >= end:
                return
            late.append(now - due)
            account(client, poll, answers)

    threads = [threading.Thread(target=consume, args=(c, late)) for c, late in zip(clients, lateness, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(len(late) for late in lateness), [x for late in lateness for x in late]


def with_pool(count: int, workers: int, seconds: float) -> tuple[int, list[float]]:
    clients, poll = consumers(count), a_poll(RECORDS_PER_POLL)
    answers = answers_to(poll)
    start = time.monotonic()
    due = [(start + PROCESSING_S * i / count, i) for i in range(count)]  # spread like threads started in turn
    heapq.heapify(due)
    lock, late_all = threading.Lock(), []
    end = start + seconds

    def serve() -> None:
        while True:
            with lock:
                at, i = heapq.heappop(due)
            wait = at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            now = time.monotonic()
            if now >= end:
                return
            late_all.append(now - at)
            account(clients[i], poll, answers)
            with lock:
                heapq.heappush(due, (time.monotonic() + PROCESSING_S, i))

    threads = [threading.Thread(target=serve) for _ in range(min(workers, count))]  # each holds one due consumer
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(late_all), late_all


def line(label: str, polls: int, late: list[float], seconds: float, most: float) -> str:
    rate = polls / seconds
    p50, p99 = np.percentile(late, [50, 99]) * 1e3 if late else (float("nan"), float("nan"))
    return f"{label:<24} {rate:>10,.0f} {rate / most:>8.0%} {p50:>9.2f} {p99:>9.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--consumers", default="30,100,300", help="consumer counts, comma-separated")
    parser.add_argument("--pool", default="1,4", help="pool sizes to compare, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    most = capacity(args.seconds)
    print(f"one thread accounting back to back: {most:,.0f} polls/s ({1e6 / most:.0f} µs a poll of {RECORDS_PER_POLL})")
    print(f"{'':<24} {'polls/s':>10} {'of that':>8} {'late p50':>9} {'late p99':>9}  (ms)")
    for count in (int(c) for c in args.consumers.split(",")):
        wanted = count / PROCESSING_S
        print(f"-- {count} consumers, each wanting {1 / PROCESSING_S:.0f} polls/s: {wanted:,.0f} polls/s in all")
        print(line(f"{count} threads", *with_threads(count, args.seconds), args.seconds, most))
        for workers in (int(w) for w in args.pool.split(",")):
            print(line(f"pool of {workers}", *with_pool(count, workers, args.seconds), args.seconds, most))


if __name__ == "__main__":
    main()
