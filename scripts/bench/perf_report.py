"""The report of throughput_vs_kafka_perf.py: one line per measurement, the medians of each side, the
ratios of each dimster library to Kafka's tool and of java to librdkafka, the table they print, and
the machine they were measured on."""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import subprocess
from importlib import metadata
from pathlib import Path

import confluent_kafka
import psutil
from perf_measure import KAFKA, Measurement, dimster_side

from dimster.kafka.distribution import java_executable


def ratio_pairs(names: list[str]) -> list[tuple[str, str]]:
    """(side, reference) of every reported ratio: each dimster library to the Kafka tool, java to librdkafka."""
    pairs = [(side, KAFKA) for side in names if side != KAFKA]
    java, librdkafka = dimster_side("java"), dimster_side("librdkafka")
    if java in names and librdkafka in names:
        pairs.append((java, librdkafka))
    return pairs


def brief(m: Measurement) -> str:
    return (
        f"{m.records:>9} records in {m.seconds:6.2f} s = {m.records_per_s:>9.0f} rec/s {m.mb_per_s:7.2f} MB/s, "
        f"cpu {m.cpu_s:5.1f} s, broker {m.broker_cpu_s:5.1f} s, others {m.other_cpu_s:5.1f} s"
        + (f", client thread {m.extra['thread_busy']:.0%} busy" if "thread_busy" in m.extra else "")
    )


def thread_summary(runs: list[Measurement]) -> dict:
    """dimster only: CPU of the client's own thread per record, and how busy it was."""
    if not all("thread_cpu_us_per_record" in m.extra for m in runs):
        return {}
    return {
        "thread_cpu_us_per_record": statistics.median(m.extra["thread_cpu_us_per_record"] for m in runs),
        "thread_busy": statistics.median(m.extra["thread_busy"] for m in runs),
    }


def side_summary(runs: list[Measurement]) -> dict:
    """The medians of one side's runs of one kind."""
    summary = {
        "records_per_s": statistics.median(m.records_per_s for m in runs),
        "mb_per_s": statistics.median(m.mb_per_s for m in runs),
        "cpu_us_per_record": statistics.median(m.cpu_s / m.records * 1e6 for m in runs),
        "broker_cpu_us_per_record": statistics.median(m.broker_cpu_s / m.records * 1e6 for m in runs),
        "other_cpu_s": [round(m.other_cpu_s, 1) for m in runs],
        **thread_summary(runs),
        "runs_records_per_s": [round(m.records_per_s) for m in runs],
    }
    steady = [m.steady_records_per_s for m in runs if m.steady_records_per_s]
    if steady:
        summary["steady_records_per_s"] = statistics.median(steady)
        summary["runs_steady_records_per_s"] = [round(r) for r in steady]
        summary["first_record_after_s"] = statistics.median(m.extra["first_record_after_s"] for m in runs)
    return summary


def side_ratios(side: dict, reference: dict) -> dict:
    """Ratios of one side's medians to a reference side's: rate, CPU per record, steady rate."""
    keys = ("records_per_s", "cpu_us_per_record", "steady_records_per_s")
    return {k: side[k] / reference[k] if reference[k] else None for k in keys if k in side and k in reference}


def summarize(results: list[Measurement], names: list[str]) -> dict:
    """Per kind: the medians of each side, and the ratios of the medians (see ratio_pairs)."""
    summary: dict = {}
    for kind in dict.fromkeys(m.kind for m in results):
        runs = {side: [m for m in results if m.kind == kind and m.side == side] for side in names}
        sides = {side: side_summary(measured) for side, measured in runs.items() if measured}
        ratios = {
            f"{side} / {reference}": side_ratios(sides[side], sides[reference])
            for side, reference in ratio_pairs(list(sides))
        }
        summary[kind] = {"sides": sides, "ratios": ratios}
    return summary


def print_table(summary: dict) -> None:
    """Per kind, a row per side and a row per ratio (its rate and CPU ratios in the same columns)."""
    print()
    print(
        f"{'':16}{'side':20}{'rec/s (median)':>16}{'MB/s':>9}{'process CPU µs/rec':>20}"
        f"{'thread µs/rec, busy':>22}  runs (rec/s)"
    )
    for kind, table in summary.items():
        sides, ratios = table["sides"], table["ratios"]
        for side, s in sides.items():
            runs = ", ".join(str(r) for r in s["runs_records_per_s"])
            thread = f"{s['thread_cpu_us_per_record']:.2f}, {s['thread_busy']:.0%}" if "thread_busy" in s else "-"
            print(
                f"{kind:16}{side:20}{s['records_per_s']:>16,.0f}{s['mb_per_s']:>9.1f}"
                f"{s['cpu_us_per_record']:>20.2f}{thread:>22}  {runs}"
            )
        for name, r in ratios.items():
            cpu = f"{r['cpu_us_per_record']:.2f}" if r.get("cpu_us_per_record") else "-"
            print(f"{kind:16}{'ratio':20}{r['records_per_s']:>16.2f}{'':9}{cpu:>20}{'':22}  {name}")
        if any("steady_records_per_s" in r for r in ratios.values()):
            print(f"{'':16}from the first record on (the group join left out):")
            for side, s in sides.items():
                if "steady_records_per_s" in s:
                    runs = ", ".join(str(r) for r in s["runs_steady_records_per_s"])
                    print(
                        f"{kind:16}{side:20}{s['steady_records_per_s']:>16,.0f}"
                        f"   first record after {s['first_record_after_s']:.2f} s; runs: {runs}"
                    )
            for name, r in ratios.items():
                if r.get("steady_records_per_s"):
                    print(f"{kind:16}{'ratio':20}{r['steady_records_per_s']:>16.2f}   {name}")
    print(
        "ratio rows: side / reference, of the records/s (rec/s column) and of the process CPU per record (CPU column)"
    )


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine() -> dict:
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.version(),
        "librdkafka": confluent_kafka.libversion()[0],
        "java": subprocess.run([java_executable(), "-version"], capture_output=True, text=True).stderr.splitlines()[0],
        "jpype": metadata.version("JPype1"),
    }
