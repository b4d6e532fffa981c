"""Correctness under faults: runs the same workload on a 3-node environment (replication factor 3,
acks=all, min.insync.replicas=2) once per fault and group type, and prints a Markdown table of what
each run measured: acknowledged records lost, duplicates, and the longest stretch without
consumption or acknowledgement. docs/faults.md holds its output.

    .venv/bin/python scripts/faults_table.py [--env localBeefyNetns] [--rate 1000] [--seconds 60]

Each run brings the environment up (or reuses it) and leaves it running; `dimster cluster down ENV`
stops it. The runs take about (seconds + 20 s) each.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parents[1]
FAULT_AT = 15  # seconds after load starts: the run has settled
FAULTS = {
    "kill -9 node 2, started again 20 s later": {"action": "kill", "node": 2, "durationSeconds": 20},
    "pause node 2 (SIGSTOP) for 30 s": {"action": "pause", "node": 2, "durationSeconds": 30},
    "restart node 2 (SIGTERM, start)": {"action": "restart", "node": 2},
    "isolate node 2 from the other nodes for 30 s": {"action": "isolate", "node": 2, "durationSeconds": 30},
}
GROUP_TYPES = ("SHARE_GROUP", "CONSUMER_GROUP")


def workload(consumer_type: str, fault: dict, rate: int, seconds: int) -> dict:
    return {
        "name": f"fault-{fault['action']}-{consumer_type.lower().replace('_', '-')}",
        "topics": 1,
        "partitionsPerTopic": 6,
        "replicationFactor": 3,
        "messageSize": 256,
        "producersPerTopic": 2,
        "producerRate": rate,
        "consumerType": consumer_type,
        "groupsPerTopic": 1,
        "consumersPerGroup": 3,
        "warmupSeconds": 0,
        "durationSeconds": seconds,
        "reportIntervalSeconds": 5,
        "drainTimeoutSeconds": 120,
        "kafkaConfig": {
            "producerConfig": {"acks": "all", "linger.ms": 5},
            "topicConfig": {"min.insync.replicas": 2},
        },
        "faults": [{"atSeconds": FAULT_AT, **fault}],
    }


def longest_gap(bundle: Path, column: str, roles: set[str], seconds: int) -> int:
    """The longest run of whole seconds of the measured phase in which `column` summed to 0."""
    table = pq.read_table(bundle / "metrics" / "intervals").to_pandas()
    table = table[table.role.isin(roles) & (table.phase == "measure")]
    per_second = table.groupby(table.run_time_s.astype(int))[column].sum()
    longest = current = 0
    for second in range(seconds):
        current = current + 1 if per_second.get(second, 0) == 0 else 0
        longest = max(longest, current)
    return longest


def one_run(env: str, spec: dict, results: Path) -> Path:
    path = results / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    command = [sys.executable, "-m", "dimster", "run", env, "-w", str(path), "--results", str(results), "--no-summary"]
    print(f"$ dimster run {env} -w {path.name}", file=sys.stderr)
    subprocess.run(command, cwd=REPO, check=False, stdout=sys.stderr)  # stdout is the table's
    return max((p for p in results.iterdir() if p.is_dir() and p.name.endswith(spec["name"])), key=lambda p: p.name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="localBeefyNetns", help="3 nodes; with nodeNetwork for the isolation")
    parser.add_argument("--rate", type=int, default=1000, help="msg/s over both producers")
    parser.add_argument("--seconds", type=int, default=60, help="measured seconds per run")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="dimster-faults-") as folder:
        for label, fault in FAULTS.items():
            for consumer_type in GROUP_TYPES:
                bundle = one_run(args.env, workload(consumer_type, fault, args.rate, args.seconds), Path(folder))
                info = json.loads((bundle / "run.json").read_text())
                totals = {key: info.get("totals", {}).get(key, 0) for key in ("sent", "acked", "lost", "duplicates")}
                consumers = {"share_consumer", "consumer"}
                rows.append(
                    [
                        label,
                        consumer_type,
                        info.get("status", "?"),
                        *(f"{totals[key]:,}" for key in ("sent", "acked", "lost", "duplicates")),
                        str(longest_gap(bundle, "acked", {"producer"}, args.seconds)),
                        str(longest_gap(bundle, "received", consumers, args.seconds)),
                    ]
                )
    head = ["fault", "groups", "run", "sent", "acked", "lost", "duplicates", "s without acks", "s without consumption"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0 if all(row[5] == "0" and row[2] == "completed" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
