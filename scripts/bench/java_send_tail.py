"""Where a producer's publish-delay tail comes from, outside a run: a bare pacing loop (dimster's
`Pacer`, one thread, nothing else in the process) drives one producer driver of clients/ (the driver a
run uses) at `--rate` for `--seconds` after `--warmup`, alternating the libraries for `--repeat` rounds.

Each record's publish delay (intended send time to handed to the client, as a run measures it) is
split into the three parts of its pass: how late the loop woke for it, Python before the call, and
the call itself (the records before it in the pass, and any wait inside the client); and the loop's
thread's CPU time a pass (a pass at 10,000 msg/s mostly hands over one record). Beside them, each
Python collection of the cyclic collector that took more than 2 ms (its own time and what its
callbacks did: JPype's ends with Java's `System.gc()` when the process's heap grew), and the Java
collections the run took. The JVM's options are dimster's (clients/jvm.py) with DIMSTER_CLIENT_JVM_OPTS
after them, so `DIMSTER_CLIENT_JVM_OPTS="-XX:-DisableExplicitGC -XX:+ExplicitGCInvokesConcurrent"`
measures the options of Kafka's own scripts.

    .venv/bin/python scripts/bench/java_send_tail.py [--env local] [--rate 10000] [--seconds 15] [--repeat 3]
"""

import argparse
import gc
import json
import os
import time

import numpy as np
from common import alternating
from perf_cluster import bench_cluster, create_topic

from dimster.clients import library
from dimster.clients.jvm import start_jvm
from dimster.workload.payload import make_bodies
from dimster.workload.schedule import Pacer

SLOW_COLLECTION_S = 0.002


class Collections:
    """The cyclic collector's passes longer than SLOW_COLLECTION_S, with their generation."""

    def __init__(self) -> None:
        self.began: float | None = None  # None: a collection under way as this was hooked in is not timed
        self.slow: list[tuple[int, float]] = []  # (generation, ms)

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.began = time.perf_counter()
        elif self.began is not None and (took := time.perf_counter() - self.began) > SLOW_COLLECTION_S:
            self.slow.append((info["generation"], round(took * 1e3, 1)))


def java_collections() -> int:
    """Collections the JVM has run (each a pause, or the start of a concurrent cycle)."""
    import jpype

    beans = jpype.JClass("java.lang.management.ManagementFactory").getGarbageCollectorMXBeans()
    return sum(int(bean.getCollectionCount()) for bean in beans)


def pace(bootstrap: str, topic: str, name: str, rate: float, seconds: float, warmup: float) -> dict:
    driver = library(name).PRODUCER(
        {"bootstrap.servers": bootstrap}, "tail", topic, 1, make_bodies(256, "RANDOM", 0), lambda *_: None
    )
    collections = Collections()
    java_before = java_collections() if name == "java" else 0
    start = time.time()
    measure_from, end = start + warmup, start + warmup + seconds
    pacer, sequence = Pacer(start), 0
    passes = []  # (woke, called, intended, handed over) of each measured pass
    loops, cpu_from = 0, None  # the loop's passes and its thread's CPU time once the measured phase began
    gc.callbacks.append(collections)
    try:
        while (woke := time.time()) < end:
            if woke >= measure_from:
                loops += 1
                cpu_from = time.thread_time() if cpu_from is None else cpu_from
            due = pacer.due(woke, rate, limit=20_000)
            if due:
                called = time.time()
                handed_over, _ = driver.send(sequence, due, [(None, -1)] * len(due))
                sequence += len(due)
                if due[0] >= measure_from:
                    passes.append((woke, called, np.array(due), np.asarray(handed_over)))
            driver.serve()
            if sequence % 1000 < len(due):
                driver.take_acks()
            pause = pacer.next_due(rate) - time.time()
            if pause > 0:
                time.sleep(min(pause, 0.05))
        loop_cpu = time.thread_time() - (cpu_from or 0.0)
    finally:
        gc.callbacks.remove(collections)
    java_during = java_collections() - java_before if name == "java" else None
    driver.close(5.0)
    woke_late = np.concatenate([(woke - intended) * 1e3 for woke, _, intended, _ in passes])
    before_call = np.concatenate([np.full(len(i), (c - w) * 1e3) for w, c, i, _ in passes])
    in_call = np.concatenate([(handed - called) * 1e3 for _, called, _, handed in passes])
    delay = woke_late + before_call + in_call
    tail = delay >= np.percentile(delay, 99)
    return {
        "library": name,
        "records": len(delay),
        "delay_ms": {q: round(float(np.percentile(delay, p)), 3) for q, p in (("p50", 50), ("p99", 99))}
        | {"max": round(float(delay.max()), 2)},
        "tail_median_ms": {
            part: round(float(np.median(values[tail])), 3)
            for part, values in (("woke_late", woke_late), ("before_call", before_call), ("in_call", in_call))
        },
        "passes": loops,
        "loop_cpu_us_per_pass": round(loop_cpu / max(loops, 1) * 1e6, 1),  # sleeps' own system time included
        "python_collections_over_2ms": collections.slow,
        "java_collections": java_during,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="local")
    parser.add_argument("--libraries", default="java,librdkafka")
    parser.add_argument("--rate", type=float, default=10_000)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(
        json.dumps({"load_average_before": os.getloadavg(), "jvm_opts": os.environ.get("DIMSTER_CLIENT_JVM_OPTS", "")})
    )
    with bench_cluster(args.env) as cluster:
        topic = f"send-tail-{int(time.time())}"
        create_topic(cluster, topic, 6)
        cases = args.libraries.split(",")
        if "java" in cases:  # a librdkafka-only run starts no JVM
            start_jvm(cluster.kafka_version)
        alternating(
            cases, args.repeat, lambda name: pace(cluster.bootstrap, topic, name, args.rate, args.seconds, args.warmup)
        )


if __name__ == "__main__":
    main()
