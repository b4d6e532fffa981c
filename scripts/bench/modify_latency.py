"""How long a live `--modify --set producerRate=...` takes to show in the measured rates.

Starts a detached run on ENV, alternates the producer rate between two values a few times, stops,
and reads the run's own records: for each modification, the time from its `applied` timestamp
(modifications.jsonl) to the end of the first one-second interval whose sent count is within 10% of
the new rate (metrics/intervals). Also reports the CLI round trip of `--modify` itself.

    .venv/bin/python scripts/bench/modify_latency.py [--env local] [--changes 6]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[2]


def dimster(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dimster", *args], cwd=ROOT, capture_output=True, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="local")
    parser.add_argument("--changes", type=int, default=6)
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
    started = dimster("run", args.env, "-w", str(workload), "--detach", "--json", "--results", str(folder))
    if started.returncode:
        sys.exit(started.stderr)
    bundle = Path(json.loads(started.stdout)["results"])
    round_trips = []
    try:
        time.sleep(8)
        for i in range(args.changes):
            rate = args.high if i % 2 == 0 else args.low
            t0 = time.perf_counter()
            result = dimster("run", args.env, "--modify", "--set", f"producerRate={rate}")
            round_trips.append(time.perf_counter() - t0)
            if result.returncode:
                sys.exit(result.stderr)
            time.sleep(6)
    finally:
        dimster("stop", args.env)

    modifications = [json.loads(line) for line in (bundle / "modifications.jsonl").read_text().splitlines()]
    intervals = pq.read_table(bundle / "metrics" / "intervals").to_pandas()
    sent = intervals[intervals.role == "producer"].groupby("end_time").sent.sum().sort_index()
    delays = []
    for change in modifications:
        after = sent[sent.index > change["applied"]]
        hit = after[(after - change["new"]).abs() <= 0.1 * change["new"]]
        if len(hit):
            delays.append(hit.index[0] - change["applied"])
    print(
        f"modifications: {len(modifications)}; visible in a 1 s interval after (s): "
        f"median {statistics.median(delays):.2f}, max {max(delays):.2f}"
    )
    print(
        f"`dimster run --modify` round trip (s): median {statistics.median(round_trips):.2f}, "
        f"max {max(round_trips):.2f}"
    )
    print(f"bundle: {bundle}")


if __name__ == "__main__":
    main()
