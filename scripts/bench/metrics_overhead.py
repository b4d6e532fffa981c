"""The producer's maximum rate with the run's exporter and the brokers' JMX agent on and off.

Two environments of one scratch project, side by side in one invocation, only one broker running
at a time: `metrics-on` (brokerMetrics and metricsEndpoint on, and `dimster monitor up` running
Prometheus during its runs) and `metrics-off` (both off, no Prometheus). The workload is one
producer flat out (producerRate far above what the machine can do) and one share consumer; each
run's `throughput.produced_msgs_per_s` from summary/summary.json is compared. An unreported warm-up
round, then `--repeat` rounds, each running both sides with the side that goes first alternating.

    .venv/bin/python scripts/bench/metrics_overhead.py [--duration 30] [--repeat 3] [--json-out FILE]

Everything (clusters, Prometheus, data) lives in a temporary folder that is removed at the end.
See docs/benchmarks.md for the method and measured results.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import yaml

REPO = Path(__file__).resolve().parents[2]
MONITOR_PORT = 20095
BASE_PROFILE = {"backend": "local", "nodes": 1, "heap": "1g", "host": "127.0.0.1", "workers": 1}
PROFILES = {
    "on": (
        "metrics-on",
        {"brokerMetrics": True, "metricsEndpoint": True, "brokerPortBase": 19892, "controllerPortBase": 19992}
        | {"brokerMetricsPortBase": 20092},
    ),
    "off": (
        "metrics-off",
        {"brokerMetrics": False, "metricsEndpoint": False, "brokerPortBase": 19893, "controllerPortBase": 19993},
    ),
}


def dimster(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The dimster CLI of this interpreter, with the scratch project's DIMSTER_* variables."""
    result = subprocess.run([sys.executable, "-m", "dimster", *args], capture_output=True, text=True, env=os.environ)
    if check and result.returncode:
        raise SystemExit(f"`dimster {' '.join(args)}` failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def make_project(root: Path, duration: int) -> Path:
    """run/ copied from the repo, the two environment profiles, and the workload file."""
    shutil.copytree(REPO / "run", root / "run")
    for env, keys in PROFILES.values():
        (root / "run" / "environments" / f"{env}.yaml").write_text(yaml.safe_dump(BASE_PROFILE | keys))
    workload = root / "metrics-overhead.yaml"
    workload.write_text(
        yaml.safe_dump(
            {
                "name": "metrics-overhead",
                "topics": 1,
                "partitionsPerTopic": 6,
                "messageSize": 512,
                "producersPerTopic": 1,
                "producerRate": 10_000_000,
                "consumerType": "SHARE_GROUP",
                "groupsPerTopic": 1,
                "consumersPerGroup": 1,
                "kafkaConfig": {"producerConfig": {"linger.ms": 5}},
                "warmupSeconds": 5,
                "durationSeconds": duration,
                "drainTimeoutSeconds": 60,
            }
        )
    )
    return workload


def prometheus_scrape_seconds(seconds: float) -> dict[str, float]:
    """Prometheus' mean scrape duration per job over the last `seconds` (the run's endpoint, the broker)."""
    query = f"avg by (job) (avg_over_time(scrape_duration_seconds[{int(seconds)}s]))"
    url = f"http://127.0.0.1:{MONITOR_PORT}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            result = json.load(response)["data"]["result"]
    except OSError:
        return {}
    return {r["metric"]["job"]: round(float(r["value"][1]), 4) for r in result}


def run_side(side: str, workload: Path, results: Path) -> dict:
    """Bring this side's cluster up (the other one down), run the workload once, read its summary."""
    env, other = PROFILES[side][0], PROFILES["off" if side == "on" else "on"][0]
    dimster("cluster", "down", other, check=False)
    dimster("cluster", "up", env)
    status = json.loads(dimster("cluster", "status", env, "--json").stdout)
    brokers = [psutil.Process(n["pid"]) for n in status.get("nodes", []) if n.get("pid")]
    if side == "on":
        dimster("monitor", "up", env, "--port", str(MONITOR_PORT))
    try:
        cpu_before = sum(sum(p.cpu_times()[:2]) for p in brokers)
        started = time.monotonic()
        dimster("run", env, "-w", str(workload), "--results", str(results))
        elapsed = time.monotonic() - started
        broker_cpu = sum(sum(p.cpu_times()[:2]) for p in brokers) - cpu_before
        scrapes = prometheus_scrape_seconds(elapsed) if side == "on" else {}
    finally:
        if side == "on":
            dimster("monitor", "down", env, check=False)
    (summary,) = results.glob("*/summary/summary.json")
    throughput = json.loads(summary.read_text())["throughput"]
    return {
        "side": side,
        "produced_msgs_per_s": throughput["produced_msgs_per_s"],
        "consumed_msgs_per_s": throughput.get("consumed_msgs_per_s"),
        "broker_cpu_s": round(broker_cpu, 1),
        "prometheus_scrape_s": scrapes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=30, help="durationSeconds of each run")
    parser.add_argument("--repeat", type=int, default=4, help="measured rounds (after one warm-up round)")
    parser.add_argument("--json-out", type=Path, help="write the table and every run as JSON")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="dimster-metrics-overhead-"))
    os.environ["DIMSTER_PROJECT_DIR"] = str(scratch)
    os.environ["DIMSTER_STATE_DIR"] = str(scratch / "state")
    workload = make_project(scratch, args.duration)
    runs: list[dict] = []
    try:
        for round_ in range(args.repeat + 1):
            order = ["on", "off"] if round_ % 2 == 0 else ["off", "on"]
            for side in order:
                measured = run_side(side, workload, scratch / "results" / f"{round_}-{side}")
                label = "warm-up" if round_ == 0 else f"round {round_}"
                print(f"{label}: {side:>3} {measured['produced_msgs_per_s']:>10,.0f} msg/s", flush=True)
                if round_:
                    runs.append(measured | {"round": round_})
    finally:
        dimster("monitor", "down", PROFILES["on"][0], check=False)
        for env, _ in PROFILES.values():
            dimster("cluster", "down", env, "--purge", check=False)
        shutil.rmtree(scratch, ignore_errors=True)

    sides = {}
    for side in PROFILES:
        rates = [r["produced_msgs_per_s"] for r in runs if r["side"] == side]
        sides[side] = {"median_produced_msgs_per_s": statistics.median(rates), "runs": rates}
    ratio = sides["on"]["median_produced_msgs_per_s"] / sides["off"]["median_produced_msgs_per_s"]
    print(f"\n{'side':<5} {'median msg/s':>13}  runs (msg/s)")
    for side, figures in sides.items():
        listed = ", ".join(f"{rate:,.0f}" for rate in figures["runs"])
        print(f"{side:<5} {figures['median_produced_msgs_per_s']:>13,.0f}  {listed}")
    print(f"ratio on/off of the medians: {ratio:.3f} (goal >= 0.97)")
    if args.json_out:
        result = {"sides": sides, "ratio_on_off": ratio, "duration_s": args.duration, "runs": runs}
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
