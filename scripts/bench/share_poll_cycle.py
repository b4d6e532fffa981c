"""Whether Kafka's Java share consumer fetches while its application is away from `poll`.

One topic is filled with `--records` records of 512 B (librdkafka, in this process); then dimster's Java
share consumer driver (clients/java.py, the driver a run uses, without dimster's accounting) drains it
in a new share group per run, polling in a loop that does nothing else or sleeps `--pause` ms after
each poll, and sleeping so while the driver fetches ahead (`fetch_ahead`, a Java thread of its own that
polls while the application is away); the three alternate for `--repeat` rounds. Per run: records/s
from the first record on, records a poll, and the poll cycle (the time between polls' returns). If the
client fetched the next records while the application was away, a pause shorter than the cycle would
not lower the rate.

    .venv/bin/python scripts/bench/share_poll_cycle.py [--env local] [--records 300000] [--pause 4] [--repeat 3]
"""

import argparse
import os
import time

from confluent_kafka import Producer
from perf_cluster import bench_cluster, create_topic, share_groups_from_earliest

from dimster.clients.java import JavaConsumer
from dimster.clients.jvm import start_jvm


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 65536})
    value = b"x" * 512
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush()


def drain(bootstrap: str, topic: str, group: str, records: int, pause: float, ahead: bool) -> dict:
    consumer = JavaConsumer({"bootstrap.servers": bootstrap, "group.id": group}, "c0", True, lambda *_: None)
    consumer.subscribe(topic)
    consumer.fetch_ahead(ahead)
    got = polls = first_count = 0
    first: float | None = None
    started = time.monotonic()
    while got < records and time.monotonic() - started < 300:
        polled = consumer.poll(1.0)
        if polled is None:
            continue
        if first is None:
            first, first_count = time.monotonic(), len(polled.partitions)
        got, polls = got + len(polled.partitions), polls + 1
        if pause:
            time.sleep(pause)
    ended = time.monotonic()
    unseen = consumer.halt().unseen  # fetched ahead and never taken: released by the close
    consumer.close()
    if first is None or got < records:
        raise SystemExit(f"{group}: {got} of {records} records within 300 s")
    return {
        "pause_ms": pause * 1000,
        "fetch_ahead": ahead,
        "left_unseen": 0 if unseen is None else unseen.count,
        "records_per_s": round((got - first_count) / (ended - first)),
        "per_poll": round(got / polls),
        "cycle_ms": round(1000 * (ended - first) / max(1, polls - 1), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="local")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--pause", type=float, default=4.0, help="ms of sleep after each poll, in every other run")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with bench_cluster(args.env) as cluster:
        topic = f"share-poll-cycle-{int(time.time())}"
        create_topic(cluster, topic, 6)
        fill(cluster.bootstrap, topic, args.records)
        start_jvm(cluster.kafka_version)
        for round_number in range(1, args.repeat + 1):
            for pause, ahead in ((0.0, False), (args.pause / 1000, False), (args.pause / 1000, True)):
                group = f"{topic}-{round_number}-{pause}-{ahead}"
                share_groups_from_earliest(cluster, [group])
                measured = drain(cluster.bootstrap, topic, group, args.records, pause, ahead)
                print({"round": round_number, **measured}, flush=True)


if __name__ == "__main__":
    main()
