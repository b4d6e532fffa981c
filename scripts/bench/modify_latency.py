"""How long a live `--modify --set producerRate=...` takes to show in the status and on the console.

Starts a detached run on ENV and alternates the producer rate between two values (`--changes` times,
`--gap` seconds apart). For each change: the CLI round trip of `dimster run ENV --modify` (Python
start-up included); the time from the command's return until the run's status (`GET /status`, polled
every 20 ms in this process, as `dimster status` reads it) shows a `pubRate` within 10% of the new rate;
and until the console's `rates_since_change` line (its event's time in events.jsonl). The load
average is printed before the run. Medians and p99 (nearest rank) of each.

    .venv/bin/python scripts/bench/modify_latency.py [--env local] [--changes 20] [--gap 5]
"""

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml
from common import dimster, percentile  # beside this script

from dimster.coordinator.control.run_state import control_request


def until_status_shows(env: str, rate: float, timeout: float = 10.0) -> float:
    """Seconds from now until the status's pubRate is within 10% of `rate` (inf if not within `timeout`)."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if abs(control_request(env, "GET", "/status", timeout=10)["pubRate"] - rate) <= 0.1 * rate:
            return time.perf_counter() - start
        time.sleep(0.02)
    return math.inf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="local")
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--gap", type=float, default=5.0, help="seconds from one change to the next")
    parser.add_argument("--low", type=int, default=500)
    parser.add_argument("--high", type=int, default=2000)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="dimster-modify-bench-"))
    workload = folder / "modify-latency.yaml"
    workload.write_text(
        yaml.safe_dump(
            {
                "name": "modify-latency",
                "partitionsPerTopic": 3,
                "messageSize": 256,
                "producersPerTopic": 1,
                "producerRate": args.low,
                "consumersPerGroup": 2,
                "durationSeconds": 0,
                "reportIntervalSeconds": 5,
            }
        )
    )
    env = dict(os.environ)  # the CLI's, as this script's
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    started = dimster(env, "run", args.env, "-w", str(workload), "--detach", "--json", "--results", str(folder))
    if started.returncode:
        sys.exit(started.stderr)
    bundle = Path(json.loads(started.stdout)["results"])
    round_trips, to_status, returned_at = [], [], []
    try:
        time.sleep(8)
        for i in range(args.changes):
            rate = args.high if i % 2 == 0 else args.low
            t0 = time.perf_counter()
            result = dimster(env, "run", args.env, "--modify", "--set", f"producerRate={rate}")
            round_trips.append(time.perf_counter() - t0)
            returned_at.append(time.time())
            if result.returncode:
                sys.exit(result.stderr)
            to_status.append(until_status_shows(args.env, rate))
            time.sleep(max(0.0, args.gap - (time.perf_counter() - t0)))
    finally:
        dimster(env, "stop", args.env)

    told = [e["time"] for e in map(json.loads, (bundle / "events.jsonl").read_text().splitlines())
            if e.get("event") == "rates_since_change"]  # fmt: skip
    applied = [json.loads(line)["applied"] for line in (bundle / "modifications.jsonl").read_text().splitlines()]
    # each change's line: the first told after it was applied (before the next was)
    ends = [*applied[1:], math.inf]
    lines = [min((t for t in told if at <= t < end), default=math.inf) for at, end in zip(applied, ends, strict=True)]
    to_console = [line - back for line, back in zip(lines, returned_at, strict=True)]
    for name, values in (
        ("`dimster run --modify` round trip", round_trips),
        ("--modify returned -> status pubRate within 10% of the new rate", to_status),
        ("--modify returned -> console line `since the change`", to_console),
    ):
        median, p99 = statistics.median(values), percentile(values, 0.99)
        print(f"{name} (s): median {median:.2f}, p99 {p99:.2f}, of {len(values)}")
    print(f"bundle: {bundle}")


if __name__ == "__main__":
    main()
