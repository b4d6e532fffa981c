"""Kafka's side of throughput_vs_kafka_perf.py: ProducerPerformance and ShareConsumerPerformance run
as their own JVMs, with the JVM options of Kafka's scripts, and measured by their own summaries."""

from __future__ import annotations

import argparse
import subprocess
import time

from perf_cluster import Cluster
from perf_measure import KAFKA, CpuMeter, Measurement, producer_properties
from perf_output import producer_total, share_stats

from dimster.kafka.distribution import KafkaDistribution

TOOL_JVM_OPTIONS = (  # what kafka-producer-perf-test.sh / kafka-run-class.sh use
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-Djava.awt.headless=true",
    "-Dlog4j2.level=WARN",
)


def tool_command(dist: KafkaDistribution, main_class: str, *args: str) -> list[str]:
    return dist.java(f"org.apache.kafka.tools.{main_class}", *args, jvm_options=TOOL_JVM_OPTIONS)


def run_tool(command: list[str], timeout: float) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"{command[-1]} ... failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


def run_measured(command: list[str], cluster: Cluster, args: argparse.Namespace) -> tuple[str, CpuMeter, float]:
    """Run a tool under the CPU meter: its output, the meter, and the tool's wall time with its JVM's start-up."""
    with CpuMeter(cluster.broker_pids) as cpu:
        started = time.monotonic()
        out = run_tool(command, timeout=args.max_seconds + 120)
        wall = time.monotonic() - started
    return out, cpu, wall


def perf_producer(
    dist: KafkaDistribution, cluster: Cluster, topic: str, records: int, args: argparse.Namespace
) -> Measurement:
    """ProducerPerformance at full speed; its own summary line (timed up to the final flush)."""
    props = [f"{k}={v}" for k, v in {"bootstrap.servers": cluster.bootstrap, **producer_properties(args)}.items()]
    command = tool_command(
        dist,
        "ProducerPerformance",
        *("--topic", topic, "--num-records", str(records), "--record-size", str(args.record_size)),
        *("--throughput", "-1", "--producer-props", *props),
    )
    out, cpu, wall = run_measured(command, cluster, args)
    total = producer_total(out)
    if total is None:
        raise SystemExit(f"no summary line in ProducerPerformance's output:\n{out}")
    return Measurement(
        "producer",
        KAFKA,
        total.records,
        total.records / total.records_per_s,
        total.records_per_s,
        total.mb_per_s,
        cpu.children,
        cpu.broker,
        extra={"avg_latency_ms": total.avg_latency_ms, "process_wall_s": round(wall, 3)},
        other_cpu_s=cpu.other,
    )


def perf_share_consumer(
    dist: KafkaDistribution, cluster: Cluster, topic: str, group: str, records: int, args: argparse.Namespace
) -> Measurement:
    """ShareConsumerPerformance with one consumer. Its summary is timed from subscribe to the last
    record; its progress lines (every 100 ms) tell when the first record came."""
    command = tool_command(
        dist,
        "ShareConsumerPerformance",
        *("--bootstrap-server", cluster.bootstrap, "--topic", topic, "--group", group),
        # --timeout also bounds the whole run (the tool interrupts its consumer thread after it)
        *("--num-records", str(records), "--threads", "1", "--timeout", str(int(args.max_seconds * 1000))),
        *("--show-detailed-stats", "--reporting-interval", "100"),
    )
    out, cpu, wall = run_measured(command, cluster, args)
    stats = share_stats(out)
    progress = [s for s in stats if s.progress]
    summary = [s for s in stats if not s.progress]
    if not summary:
        raise SystemExit(f"no summary in ShareConsumerPerformance's output:\n{out}")
    total = summary[-1]
    count = total.records
    if count < records:
        raise SystemExit(f"ShareConsumerPerformance read only {count} of {records} records:\n{out}")
    first_at = progress[0].end if progress else total.start
    first_count = progress[0].records if progress else 0
    steady_s = total.end - first_at
    return Measurement(
        "share_consumer",
        KAFKA,
        count,
        total.ms / 1000,
        total.records_per_s,
        total.mb_per_s,
        cpu.children,
        cpu.broker,
        (count - first_count) / steady_s if steady_s > 0 else None,
        {"first_record_after_s": round(first_at - total.start, 3), "process_wall_s": round(wall, 3)},
        other_cpu_s=cpu.other,
    )
