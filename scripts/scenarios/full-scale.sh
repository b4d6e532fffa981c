#!/usr/bin/env bash
# The reference post's workload at full scale on one host (issue: 300 share consumers in one run).
# One campaign, run/campaigns/full-scale.yaml: one share group of 50, 150 and 300 share consumers, on
# Kafka's Java clients and on librdkafka, each processing 5 ms per record (max.poll.records 30) while
# two librdkafka producers write 2,000 msg/s of 500 bytes. Per point the script prints the consumed
# rate, the end-to-end latency and what the workers cost (cores, resident memory, threads, from the
# workers' own reports over the measured phase). Per library it fits a line through the points: the
# cost of each added share consumer, and what a worker costs before its first. Then a second
# campaign, run/campaigns/full-scale-limits.yaml, searches per library the highest rate the 300
# consumers keep up with (explore-limits, an e2e p99 under 5 s) on LIMIT_WORKERS worker processes
# (default 3: the producers on one, the consumers over the others). The script checks:
#   - every point completed, consumed what was produced, and its account closes (each acknowledged
#     record accepted, rejected, archived or unconsumed: none lost);
#   - the 300-consumer points ran all 300, and every one of them received records;
#   - each library's search ended in a limit, and lost nothing.
# It exits 1 when a campaign fails or a check does not hold, and leaves the campaign folders.
# docs/scenarios/full-scale.md turns the costs and limits into a sizing rule for worker hosts.
#
# Usage: scripts/scenarios/full-scale.sh [ENV]    (default: local)
# RESULTS_DIR (default results/campaigns of the project): where the campaign folders go.
# LIMIT_WORKERS (default 3): worker processes of the limits search (`dimster campaign --workers`).
# About 20 minutes on a 2-core machine. The cluster is left up, as after any run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
env="${1:-local}"
name=full-scale
campaign="$root/run/campaigns/$name.yaml"
# shellcheck source=lib/campaign.sh
source "$root/scripts/scenarios/lib/campaign.sh"

echo "== $name on $env: 50, 150 and 300 share consumers at 5 ms per record, Java and librdkafka"
run_campaign
require_summary

costs="$folder"
costs_status="$status"

name=full-scale-limits
campaign="$root/run/campaigns/$name.yaml"
limit_workers="${LIMIT_WORKERS:-3}"
echo
echo "== $name on $env: the highest rate 300 share consumers sustain on $limit_workers workers, Java and librdkafka"
run_campaign --workers "$limit_workers"
require_summary

echo
echo "== per point ($costs)"
"$python" - "$costs" "$costs_status" "$folder" "$status" <<'PY'
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

folder, status = Path(sys.argv[1]), int(sys.argv[2])
limits_folder, limits_status = Path(sys.argv[3]), int(sys.argv[4])
runs = pd.read_csv(folder / "campaign" / "summary" / "runs.csv")
points = json.loads((folder / "campaign.json").read_text())["points"]
LIBRARY, COUNT = "clientLibrary.shareConsumer", "consumersPerGroup"

print(f"{'library':>10} {'consumers':>9} {'produced/s':>10} {'consumed/s':>10} {'e2e p50 ms':>10} {'e2e p99 ms':>10} "
      f"{'cores':>6} {'memory MB':>9} {'threads':>7} {'lost':>5}")
checks, failed = [], []
for _, row in runs.sort_values([LIBRARY, COUNT]).iterrows():
    label = f"{row[LIBRARY]}, {row[COUNT]} consumers"
    if row["status"] != "completed":
        failed.append(f"{label}: {row['status']}")
        continue
    print(f"{row[LIBRARY]:>10} {row[COUNT]:>9} {row['produced_msgs_per_s']:>10.0f} {row['consumed_msgs_per_s']:>10.0f} "
          f"{row['e2e_p50_ms']:>10.1f} {row['e2e_p99_ms']:>10.1f} {row['worker_cores']:>6.2f} "
          f"{row['worker_memory_mb']:>9.0f} {row['worker_threads']:>7.0f} {row['lost']:>5.0f}")
    checks.append((f"{label}: received {row['received']:,.0f} of {row['sent']:,.0f} sent, lost {row['lost']:.0f}",
                   row["received"] >= row["sent"] and row["lost"] == 0))

for point in points:
    bundle = point.get("bundle")
    info = json.loads((folder / bundle / "run.json").read_text()) if bundle else {}
    label = ", ".join(f"{v}" for v in point["values"].values())
    accounts = info.get("account") or {}
    checks.append((f"{label}: every group's account closes", bool(accounts) and all(a["closes"] for a in accounts.values())))
    if bundle and point["values"].get(COUNT) == 300:
        intervals = pd.read_parquet(folder / bundle / "metrics" / "intervals")
        consumers = intervals[(intervals.role == "share_consumer") & (intervals.phase == "measure")]
        busy = consumers[consumers.received > 0].client_id.nunique()
        checks.append((f"{label}: {consumers.client_id.nunique()} share consumers reported, {busy} of them received records",
                       consumers.client_id.nunique() == busy == 300))

print("\n== the cost of each added share consumer (a line through the points), and of a worker before its first")
print(f"{'library':>10} {'cores/consumer':>14} {'MB/consumer':>11} {'threads/consumer':>16} {'base MB':>8} {'base threads':>12}")
for library, rows in runs[runs.status == "completed"].groupby(LIBRARY):
    if len(rows) < 2:
        continue
    cores, _ = np.polyfit(rows[COUNT], rows["worker_cores"], 1)
    memory, memory_base = np.polyfit(rows[COUNT], rows["worker_memory_mb"], 1)
    threads, threads_base = np.polyfit(rows[COUNT], rows["worker_threads"], 1)
    print(f"{library:>10} {cores:>14.4f} {memory:>11.2f} {threads:>16.2f} {memory_base:>8.0f} {threads_base:>12.0f}")

print(f"\n== the highest rate 300 share consumers kept up with (e2e p99 under 5 s) ({limits_folder})")
print(f"{'library':>10} {'limit msg/s':>11} {'failed at':>9} {'worker cores':>12} {'memory MB':>9} {'threads':>7} "
      f"{'waited':>6} {'lost':>5}")
limits = pd.read_csv(limits_folder / "campaign" / "summary" / "runs.csv")
for _, row in limits.sort_values(LIBRARY).iterrows():
    label = f"{row[LIBRARY]}, 300 consumers"
    if row["status"] != "completed":
        failed.append(f"{label}, explore-limits: {row['status']}")
        continue
    limit = row["mode_limit_msgs_per_s"]
    print(f"{row[LIBRARY]:>10} {limit:>11.0f} {row['mode_lowest_failed_msgs_per_s']:>9.0f} {row['worker_cores']:>12.2f} "
          f"{row['worker_memory_mb']:>9.0f} {row['worker_threads']:>7.0f} {row['worker_wake_wait_share']:>6.0%} "
          f"{row['lost']:>5.0f}")
    checks.append((f"{label}: a limit of {limit:,.0f} msg/s, and lost {row['lost']:.0f}", limit > 0 and row["lost"] == 0))

print()
for text, holds in checks:
    print(f"{'yes' if holds else 'NO':>3}: {text}")
print(f"\ncharts: {folder / 'campaign.html'} and {limits_folder / 'campaign.html'}")
code = status or limits_status
if failed or code or not all(holds for _, holds in checks):
    print("FAILED" + (f": campaign exit code {code}" if code else "") + "".join(f"\n  {f}" for f in failed))
    sys.exit(1)
PY
