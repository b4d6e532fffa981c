#!/usr/bin/env bash
# Jack Vanlightly's "pathological fetch waits with record_limit" (2026-06-24), at a scale a 2-core
# machine sustains: with share.acquire.mode=record_limit, fewer share consumers than partitions and
# skewed partitions, draining a backlog is said to stall on fetch.max.wait.ms, so the drain rate falls
# well below batch_optimized's, and lowering fetch.max.wait.ms from 500 to 50 recovers much of it.
#
# Why several brokers: in record_limit mode Kafka's Java share consumer sends its ShareFetch to one
# broker per poll (ShareConsumeRequestManager: "we only send a full ShareFetch to a single node at a
# time"), rotating over its partitions' leaders; a fetch that lands on a broker whose partitions
# are drained waits fetch.max.wait.ms for records that never come. batch_optimized fetches from every
# broker at once. With one broker there is nothing to rotate over, so the default is localBeefy
# (three nodes; the topic is created with replication factor 1, leaders spread over the three).
#
# One campaign, run/campaigns/share-record-limit-stall.yaml, in the drain-backlog test mode: for each
# of share.acquire.mode {batch_optimized, record_limit} x fetch.max.wait.ms {500, 50}, a fresh topic
# of 6 partitions fills with the same backlog (200,000 records of 512 bytes, PARTITION_ZIPF: 41 % on
# partition 0, 7 % on partition 5) while the 2 Java share consumers are paused (they leave the group),
# then they resume and drain it with producers stopped, for at most 120 s. Per cell the script prints
# the plan's drain rate (run.json's mode.drain_msgs_per_s: records over first to last record), the
# stall's floor (the slowest 10 s of the drain, from metrics/intervals), whether it drained and how
# many records were left, then the two direction checks, and leaves the campaign folder
# (campaign.json, campaign.html, one bundle per cell) for a closer look.
#
# A cell that stalls until its drain times out is a result, not a failure. The script exits non-zero
# when the campaign fails or a cell did not run; a direction that does not show is reported, not
# failed: the figures are what this machine measured. Ctrl-C or a failure stops the running cell
# (`dimster stop`). The cluster is left up, as after any run (`dimster cluster down ENV`).
#
# Usage: scripts/scenarios/share-record-limit-stall.sh [ENV]    (default: localBeefy)
# BACKLOG_RECORDS (default 200000): the backlog each cell drains (built at 20,000 msg/s).
# REPEAT (default 1): runs per cell; the table then gives the mean and the range.
# RESULTS_DIR (default results/campaigns of the project): where the campaign folder goes.
# About 8 minutes with the defaults on a 2-core machine (the stalled cells drain for up to 120 s each).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
env="${1:-localBeefy}"
name=share-record-limit-stall
campaign="$root/run/campaigns/$name.yaml"
# shellcheck source=lib/campaign.sh
source "$root/scripts/scenarios/lib/campaign.sh"

"$dimster" validate "$root/run/workloads/$name.yaml" >/dev/null
if [ -n "${BACKLOG_RECORDS:-}" ] || [ -n "${REPEAT:-}" ]; then
  # the shipped campaign with the scale asked for: a copy, its base named by absolute path
  "$python" - "$campaign" "$scratch/$name.yaml" "${BACKLOG_RECORDS:-}" "${REPEAT:-}" <<'EOF'
import sys, pathlib, yaml
src, dst, backlog, repeat = sys.argv[1:]
doc = yaml.safe_load(pathlib.Path(src).read_text())
doc["base"] = str((pathlib.Path(src).parent / doc["base"]).resolve())
if backlog:
    doc["mode"]["backlogRecords"] = int(backlog)
if repeat:
    doc["repeat"] = int(repeat)
pathlib.Path(dst).write_text(yaml.safe_dump(doc, sort_keys=False))
EOF
  campaign="$scratch/$name.yaml"
fi

echo "== $name on $env: share.acquire.mode x fetch.max.wait.ms, each cell drains the same backlog"
run_campaign

if [ -z "$folder" ] || [ ! -f "$folder/campaign.json" ]; then
  echo "FAILED: the campaign (exit $status) left no campaign folder in $results"
  exit 1
fi

echo
echo "== drain of the backlog per cell ($folder)"
"$python" - "$folder" "$status" <<'EOF'
import json, statistics, sys
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq

folder, status = Path(sys.argv[1]), int(sys.argv[2])
state = json.loads((folder / "campaign.json").read_text())


def slowest_10s(bundle: Path) -> float:
    """The lowest consume rate over any 10 s of the drain while records were left: the stall's floor.
    (The consumers are paused, and receive nothing, until the drain starts.)"""
    intervals = pq.read_table(bundle / "metrics" / "intervals").to_pandas()
    consumers = intervals[intervals.role == "share_consumer"]
    per_second = consumers.groupby(consumers.end_time.round(0))["received"].sum().sort_index()
    per_second = per_second[per_second.cumsum() > 0]  # from the first record
    draining = per_second.iloc[:-2] if len(per_second) > 12 else per_second  # the last seconds empty it
    windows = draining.rolling(10).sum().dropna() / 10
    return float(windows.min()) if len(windows) else float("nan")


cells, failed = defaultdict(list), []
for point in state["points"]:
    values = point.get("values", {})
    mode = values.get("kafkaConfig.shareConsumerConfig.share.acquire.mode")
    wait = values.get("kafkaConfig.shareConsumerConfig.fetch.max.wait.ms")
    bundle = point.get("bundle")
    run = json.loads((folder / Path(bundle).name / "run.json").read_text()) if bundle else {}
    found = run.get("mode") or {}
    if point.get("status") != "completed" or found.get("outcome") not in ("drained", "timed out"):
        failed.append(f"{mode} / {wait} ms: {point.get('status')}, drain {found.get('outcome', 'not run')}")
        continue
    found["floor"] = slowest_10s(folder / Path(bundle).name)
    cells[(mode, wait)].append(found)

print(f"{'share.acquire.mode':<18} {'fetch.max.wait.ms':>17} {'backlog':>9} {'drain msg/s':>12} "
      f"{'slowest 10 s':>12} {'outcome':>10} {'left':>8} {'runs':>4}")
for (mode, wait), runs in cells.items():
    rates = [r["drain_msgs_per_s"] or 0 for r in runs]
    spread = f" ({min(rates):,.0f}-{max(rates):,.0f})" if len(rates) > 1 else ""
    drained = sum(r["outcome"] == "drained" for r in runs)
    outcome = "drained" if drained == len(runs) else f"{len(runs) - drained} timeout"
    print(f"{mode:<18} {wait:>17} {statistics.mean(r['backlog'] for r in runs):>9,.0f} "
          f"{statistics.mean(rates):>12,.0f}{spread} {statistics.mean(r['floor'] for r in runs):>12,.0f} "
          f"{outcome:>10} {statistics.mean(r['backlog_left'] or 0 for r in runs):>8,.0f} {len(runs):>4}")

floor = {cell: statistics.mean(r["floor"] for r in runs) for cell, runs in cells.items()}
# the stall shows as a floor, the slowest 10 s of the drain; a direction shows by a clear factor (the
# stall: half or less; the shorter wait: 1.5 times or more), well above one run's noise here (~10 %)
checks = [
    ("record_limit stalls where batch_optimized does not (fetch.max.wait.ms=500, slowest 10 s)",
     ("record_limit", 500), ("batch_optimized", 500), lambda ratio: ratio <= 0.5),
    ("fetch.max.wait.ms=50 raises record_limit's floor",
     ("record_limit", 50), ("record_limit", 500), lambda ratio: ratio >= 1.5),
]
print()
for text, a, b, holds in checks:
    if a in floor and b in floor:
        ratio = floor[a] / floor[b]
        verdict = "yes" if holds(ratio) else "NO"
        print(f"{verdict:>3}: {text}: {floor[a]:,.0f} against {floor[b]:,.0f} msg/s, ratio {ratio:.2f}")
print(f"\ncharts: {folder / 'campaign.html'}")
if failed or status:
    print(f"FAILED: campaign exit code {status}" + "".join(f"\n  {f}" for f in failed))
    sys.exit(1)
EOF
