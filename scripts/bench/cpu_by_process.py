"""Where a command's CPU goes, by kind of process: runs the command and samples /proc twice a second,
keeping each process's last CPU time (user + system), then prints the seconds of CPU per kind (brokers,
Spark, Java clients and helpers, dimster's Python processes, pytest, podman ...) and the command's wall
time. It is how the kafka tier's cost was split (docs/testing.md).

    .venv/bin/python scripts/bench/cpu_by_process.py -- scripts/test.sh -m kafka -n 2

A process that lives under half a second may be missed, and a process's CPU is its own (not its
children's, which are sampled themselves). The whole host's busy seconds are given beside the sum, so
the share missed (and any other work on the host) shows."""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict

TICK = os.sysconf("SC_CLK_TCK")
KINDS = (  # (kind, every word its command line holds), first match wins
    ("broker", ("java", "kafka.Kafka")),
    ("spark server", ("java", "SparkConnectServer")),
    ("spark driver", ("java", "org.apache.spark")),
    ("java helper (DimsterKafkaTool)", ("java", "DimsterKafkaTool")),
    ("java clients", ("java", "Dimster")),
    ("java other", ("java",)),
    ("dimster worker (and the worker server it forks from)", ("python", "multiprocessing")),
    ("dimster agent", ("dimster", "worker serve")),
    ("dimster run", ("dimster", " run ")),
    ("pytest", ("pytest",)),
    ("dimster other commands", ("dimster",)),
    ("podman", ("podman",)),
    ("conmon/runc", ("conmon",)),
    ("prometheus", ("prometheus",)),
    ("chromium", ("chrom",)),
)


def kind_of(cmdline: str) -> str:
    for kind, words in KINDS:
        if all(w in cmdline for w in words):
            return kind
    return "other: " + (cmdline.split(" ")[0].rsplit("/", 1)[-1] or "?")[:24]


def sample(seen: dict[tuple[int, int], tuple[str, float]]) -> None:
    """Each live process's own CPU seconds, under its kind."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
        key = (int(pid), int(fields[19]))  # a PID and its start time: one process
        if key in seen:
            seen[key] = (seen[key][0], max(cpu, seen[key][1]))
        elif cmdline:
            seen[key] = (kind_of(cmdline), cpu)


def host_busy() -> float:
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / TICK


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    seen: dict[tuple[int, int], tuple[str, float]] = {}
    sample(seen)
    before = dict(seen)
    busy, started = host_busy(), time.monotonic()
    process = subprocess.Popen(command)
    for number in (signal.SIGINT, signal.SIGTERM):  # passed on: the command ends as it would alone
        signal.signal(number, lambda signum, _frame: process.send_signal(signum))
    while process.poll() is None:
        sample(seen)
        time.sleep(0.5)
    wall, busy = time.monotonic() - started, host_busy() - busy
    by_kind: dict[str, float] = defaultdict(float)
    for key, (kind, cpu) in seen.items():
        by_kind[kind] += cpu - (before[key][1] if key in before else 0.0)
    kinds = {k: round(v, 1) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]) if v >= 0.5}
    figures = {"wall": round(wall, 1), "hostBusy": round(busy, 1), "exit": process.returncode, "byKind": kinds}
    print(f"\n== {wall:,.0f} s wall, host busy {busy:,.0f} CPU-s, sampled {sum(by_kind.values()):,.0f} CPU-s")
    for kind, cpu in kinds.items():
        print(f"{cpu:9,.0f} CPU-s  {cpu / max(busy, 1e-9):6.1%}  {kind}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
