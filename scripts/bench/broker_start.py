"""What a broker's start costs with dimster's class-data archive (dimster/kafka/class_sharing.py) and
without it (the JDK's own archive only, as before): a fresh one-node `local` cluster of a scratch
project, `cluster up` to healthy, then 3 s idle; the broker's CPU then, the CLI's CPU with the storage
format it ran, and the seconds `cluster up` took. The cases alternate round by round. The storage
format maps dimster's archive in both (the profile's JVM options are the broker's): `cluster up`'s
seconds and the CLI's CPU understate the difference a fresh node's start makes.

    .venv/bin/python scripts/bench/broker_start.py --repeat 5

The archive must exist (any broker start of the version after the first makes it); the script makes
sure of that with two starts before it measures. `--c1` gives the brokers the suite's C1-only JIT.
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DIMSTER, ROOT, alternating, free_block

from dimster.kafka.class_sharing import ARCHIVE, QUIET_SECONDS, sharing_folder
from dimster.kafka.distribution import java_executable, kafka_distribution
from dimster.profile import DEFAULT_KAFKA_VERSION

ENV = "bench"


def jdk_archive() -> Path:
    """The JDK's own default archive: given last, it stands in for dimster's (a later option wins)."""
    return Path(java_executable()).resolve().parents[1] / "lib" / "server" / "classes.jsa"


def profile(port: int, case: str, c1: bool) -> str:
    options = ["-XX:TieredStopAtLevel=1"] if c1 else []
    if case == "without":
        options.append(f"-XX:SharedArchiveFile={jdk_archive()}")
    return (
        f"backend: local\nnodes: 1\nheap: 512m\nhost: 127.0.0.1\nbrokerPortBase: {port}\n"
        f"controllerPortBase: {port + 10}\nbrokerMetrics: false\nkafkaVersion: {DEFAULT_KAFKA_VERSION}\n"
        f"jvmOptions: [{', '.join(options)}]\n"
    )


def _is_broker(cmdline: list[str], state: Path) -> bool:
    return "kafka.Kafka" in cmdline and str(state) in " ".join(cmdline)


def start_once(scratch: Path, port: int, case: str, c1: bool) -> dict:
    project, state = scratch / "project", scratch / "state"
    shutil.rmtree(state, ignore_errors=True)
    (project / "run" / "environments").mkdir(parents=True, exist_ok=True)
    if not (project / "run" / "broker-configs").exists():
        shutil.copytree(ROOT / "run" / "broker-configs", project / "run" / "broker-configs")
    (project / "run" / "environments" / f"{ENV}.yaml").write_text(profile(port, case, c1))
    env = {**os.environ, "DIMSTER_PROJECT_DIR": str(project), "DIMSTER_STATE_DIR": str(state)}
    before, began = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    up = subprocess.run([*DIMSTER, "cluster", "up", ENV], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds, after = time.monotonic() - began, resource.getrusage(resource.RUSAGE_CHILDREN)
    if up.returncode != 0:
        sys.exit(f"cluster up failed: {up.stderr.strip()}")
    broker = next(p for p in psutil.process_iter(["cmdline"]) if _is_broker(p.info["cmdline"] or [], state))
    time.sleep(3)
    broker_cpu = sum(broker.cpu_times()[:2])
    subprocess.run([*DIMSTER, "cluster", "down", ENV], cwd=ROOT, env=env, capture_output=True)
    cli_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    figures = {"up_seconds": seconds, "broker_cpu": broker_cpu, "cli_cpu": cli_cpu}
    return {"case": case, **{key: round(value, 2) for key, value in figures.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--c1", action="store_true", help="the suite's C1-only JIT for the brokers")
    options = parser.parse_args()
    port = free_block(20)
    with tempfile.TemporaryDirectory(prefix="dimster-broker-start-") as folder:
        scratch = Path(folder)
        archive = sharing_folder(kafka_distribution(DEFAULT_KAFKA_VERSION)) / ARCHIVE
        for _ in range(2):  # the first start writes the class list, a later one makes the archive
            if not archive.exists():
                start_once(scratch, port, "with", options.c1)
                time.sleep(QUIET_SECONDS)  # the list is whole once it has not grown for that long
        if not archive.exists():
            sys.exit(f"no class-data archive at {archive}: nothing to compare")
        cases = ["with", "without"]
        rows = alternating(cases, options.repeat, lambda case: start_once(scratch, port, case, options.c1))
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    for case in ("with", "without"):
        mine = [row for row in rows if row["case"] == case]
        medians = {key: statistics.median(row[key] for row in mine) for key in ("up_seconds", "broker_cpu", "cli_cpu")}
        print(f"{case:8s} archive: " + ", ".join(f"{key} {value:.2f}" for key, value in medians.items()))


if __name__ == "__main__":
    main()
