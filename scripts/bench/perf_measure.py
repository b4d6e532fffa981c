"""One measurement of one side of throughput_vs_kafka_perf.py, the names of the sides, the CPU meter
every measurement runs under, and the producer config every side gets."""

from __future__ import annotations

import argparse
import resource
import time
from dataclasses import dataclass, field

import psutil

MB = 1024 * 1024  # the perf tools' MB


@dataclass
class Measurement:
    """One timed run of one side. `cpu_s`: CPU of the client process (the tool's JVM with its
    start-up, or this Python process with every thread of librdkafka or of the in-process JVM);
    `broker_cpu_s`: CPU of the broker processes meanwhile."""

    kind: str  # producer | share_consumer
    side: str  # kafka | dimster-librdkafka | dimster-java
    records: int
    seconds: float
    records_per_s: float
    mb_per_s: float
    cpu_s: float = 0.0
    broker_cpu_s: float = 0.0
    steady_records_per_s: float | None = None  # share consumers: from the first record on
    extra: dict = field(default_factory=dict)
    other_cpu_s: float = 0.0  # CPU used meanwhile by everything else on the machine


KAFKA = "kafka"  # the side of Kafka's perf tools


def dimster_side(library: str) -> str:
    """The side of a dimster client run by `library`: dimster-librdkafka, dimster-java."""
    return f"dimster-{library}"


def library_of(side: str) -> str:
    return side.removeprefix("dimster-")


class CpuMeter:
    """CPU seconds of this process, its finished children, the brokers and everything else on the
    machine (`other`: other people's work on a shared host), over a `with` block."""

    def __init__(self, broker_pids: list[int]):
        self.brokers = [psutil.Process(pid) for pid in broker_pids if psutil.pid_exists(pid)]
        self.own = self.children = self.broker = self.other = 0.0

    @staticmethod
    def _machine() -> float:
        t = psutil.cpu_times()
        return t.user + t.nice + t.system + getattr(t, "irq", 0) + getattr(t, "softirq", 0) + getattr(t, "steal", 0)

    @staticmethod
    def _children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def _broker(self) -> float:
        return sum(sum(p.cpu_times()[:2]) for p in self.brokers)

    def __enter__(self) -> CpuMeter:
        self._start = (time.process_time(), self._children(), self._broker(), self._machine())
        return self

    def __exit__(self, *exc: object) -> None:
        own, children, broker, machine = time.process_time(), self._children(), self._broker(), self._machine()
        self.own, self.children, self.broker = own - self._start[0], children - self._start[1], broker - self._start[2]
        self.other = max(0.0, machine - self._start[3] - self.own - self.children - self.broker)


def producer_properties(args: argparse.Namespace) -> dict[str, str]:
    """The producer config both sides get."""
    return {
        "acks": "all",
        "linger.ms": str(args.linger_ms),
        "batch.size": str(args.batch_size),
        "compression.type": "none",
        "enable.idempotence": args.idempotence,
    }
