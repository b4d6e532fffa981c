#!/usr/bin/env bash
# Is Kafka 4.4 faster or slower than 4.3 for my workload? (issue 35) One campaign,
# run/campaigns/kafka-versions.yaml: the reference post's workload at this machine's scale
# (run/workloads/full-scale.yaml: 300 share consumers in one group, 5 ms of processing per record,
# max.poll.records 30, 2,000 msg/s of 500-byte records on 6 partitions) on Kafka 4.3.1 and on 4.4.0.
# The campaign brings up a cluster of each version with fresh data (`cluster.kafkaVersion`), one
# after the other, and takes the last one down with its data at the end. Per version the script
# prints, from the campaign summary: produced and consumed msg/s, e2e p50/p99/p99.9, publish p99,
# the producers' request latency, records per share fetch, the workers' cores and the account
# (lost, duplicates); then the 4.4.0 / 4.3.1 ratio of each figure. It checks what must hold whatever
# the versions' speed: both points completed, every record accounted for, and each point's run.json
# names the version it ran. It exits 1 when the campaign fails or a check does not hold, and leaves
# the campaign folder (campaign.json, campaign.html with a chart per figure, one bundle per point).
#
# Usage: scripts/scenarios/kafka-versions.sh [ENV]    (default: local; a local or docker environment)
# RESULTS_DIR (default results/campaigns of the project): where the campaign folder goes.
# About 4 minutes on a 2-core machine. ENV's cluster is left down with no data (the campaign's end).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
env="${1:-local}"
name=kafka-versions
campaign="$root/run/campaigns/$name.yaml"
# shellcheck source=lib/campaign.sh
source "$root/scripts/scenarios/lib/campaign.sh"

echo "== $name on $env: the reference workload on Kafka 4.3.1, then 4.4.0, each on a fresh cluster"
run_campaign
require_summary

echo
echo "== per version ($folder)"
"$python" - "$folder" "$status" <<'PY'
import json
import sys
from pathlib import Path

import pandas as pd

folder, status = Path(sys.argv[1]), int(sys.argv[2])
runs = pd.read_csv(folder / "campaign" / "summary" / "runs.csv", dtype={"cluster.kafkaVersion": str})
FIGURES = [  # column, heading, format
    ("produced_msgs_per_s", "produced msg/s", ",.0f"),
    ("consumed_msgs_per_s", "consumed msg/s", ",.0f"),
    ("e2e_p50_ms", "e2e p50 ms", ".1f"),
    ("e2e_p99_ms", "e2e p99 ms", ".1f"),
    ("e2e_p99_9_ms", "e2e p99.9 ms", ".1f"),
    ("publish_p99_ms", "publish p99 ms", ".1f"),
    ("producer_request_latency_ms", "producer request ms", ".2f"),
    ("records_per_fetch", "records per fetch", ".1f"),
    ("worker_cores", "worker cores", ".2f"),
]
rows = {row["cluster.kafkaVersion"]: row for _, row in runs.iterrows()}
versions = list(rows)


def show(value, form: str) -> str:
    return "-" if pd.isna(value) else format(value, form)


print(f"{'':<20}" + "".join(f"{v:>12}" for v in versions) + (f"{'ratio':>9}" if len(versions) == 2 else ""))
for column, heading, form in FIGURES:
    values = [rows[v].get(column) for v in versions]
    ratio = ""
    if len(values) == 2 and not any(pd.isna(x) for x in values) and values[0]:
        ratio = f"{values[1] / values[0]:>9.2f}"
    print(f"{heading:<20}" + "".join(f"{show(x, form):>12}" for x in values) + ratio)
for column in ("sent", "received", "lost", "duplicates"):
    print(f"{column:<20}" + "".join(f"{show(rows[v].get(column), ',.0f'):>12}" for v in versions))

checks = [(f"both versions ran ({', '.join(versions)})", sorted(versions) == ["4.3.1", "4.4.0"])]
for version, row in rows.items():
    run = json.loads((folder / row["bundle"] / "run.json").read_text())
    checks.append((f"{version}: completed, 0 lost, 0 duplicates",
                   row["status"] == "completed" and row["lost"] == 0 and row["duplicates"] == 0))
    checks.append((f"{version}: run.json names Kafka {run['versions']['kafka']}", run["versions"]["kafka"] == version))
print()
for text, holds in checks:
    print(f"{'yes' if holds else 'NO':>3}: {text}")
print(f"\ncharts: {folder / 'campaign.html'}")
if status or not all(holds for _, holds in checks):
    print("FAILED" + (f": campaign exit code {status}" if status else ""))
    sys.exit(1)
PY
