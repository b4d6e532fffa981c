#!/usr/bin/env bash
# Issue 35: what do dead-letter queues (Kafka 4.4, KIP-1191) cost, and do they lose anything?
#
# One campaign, run/campaigns/dead-letter.yaml: a share group of 3 librdkafka consumers acknowledging
# explicitly rejects 0 %, 1 % or 10 % of 1,000 records/s, without a dead-letter queue (rejected
# records archived in silence), with one (metadata-only dead-letter records) and with one that copies
# each record's key and value. Per point the script prints consumed records/s, end-to-end p50 and
# p99, the brokers' Produce p99 (the dead-letter writes are Produce requests between brokers), the
# rejected records and what dimster found in the dead-letter topic. Then it checks:
#   - with a dead-letter queue, every rejected record is in the topic exactly once
#     (dead_lettered == rejected, dead_letter_missing == 0, dead_letter_duplicates == 0);
#   - without one, the topic stays empty (dead_lettered == 0) and the rejected records are archived;
#   - every point's account closes with nothing lost.
# Costs (throughput, latency) are reported, not judged: one run on 2 cores is too noisy for that.
# It exits 1 when the campaign fails or a check does not hold, and leaves the campaign folder.
#
# Usage: scripts/scenarios/dead-letter.sh [ENV]    (default: local; the cluster must run Kafka 4.4+)
# RESULTS_DIR (default results/campaigns of the project): where the campaign folder goes.
# About 10 minutes on a 2-core machine. The cluster is left up, as after any run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
env="${1:-local}"
name=dead-letter
campaign="$root/run/campaigns/$name.yaml"
# shellcheck source=lib/campaign.sh
source "$root/scripts/scenarios/lib/campaign.sh"

echo "== $name on $env: dead-letter queue {off, metadata, copy} x rejected fraction {0, 1 %, 10 %}"
run_campaign
require_summary

echo
echo "== per point ($folder)"
"$python" - "$folder" "$status" <<'EOF'
import json
import sys
from pathlib import Path

import pandas as pd

folder, status = Path(sys.argv[1]), int(sys.argv[2])
runs = pd.read_csv(folder / "campaign" / "summary" / "runs.csv")


def produce_p99(summary: dict) -> float | None:
    """The brokers' Produce p99 (ms), the worst broker's median over the measured phase."""
    rows = [r for r in (summary.get("brokers") or {}).get("requests") or [] if r.get("request") == "Produce"]
    values = [r["p99_ms"] for r in rows if r.get("p99_ms") is not None]
    return max(values) if values else None


def show(value, form: str) -> str:
    return "-" if value is None or pd.isna(value) else format(value, form)


print(f"{'queue':<9} {'rejected':>8} {'consumed/s':>10} {'e2e p50':>8} {'e2e p99':>8} {'Produce p99':>11} "
      f"{'rejected':>8} {'archived':>8} {'dead-lettered':>13} {'missing':>7} {'dupl.':>5}")
failed = []
for _, row in runs.iterrows():
    bundle = folder / row["bundle"]
    info = json.loads((bundle / "run.json").read_text())
    summary = json.loads((bundle / "summary" / "summary.json").read_text())
    queue = info["final_workload"]["deadLetterQueue"]
    enabled, copy = queue.get("enabled", True), queue.get("copyRecord", False)
    kind = "copy" if enabled and copy else ("metadata" if enabled else "off")
    fraction = info["final_workload"]["acknowledgement"].get("rejectFraction", 0.0)
    totals, latency = info["totals"], summary.get("latency_ms", {}).get("e2e", {})
    consumed = (summary.get("throughput") or {}).get("consumed_msgs_per_s")
    dead, missing, duplicates = totals["dead_lettered"], totals["dead_letter_missing"], totals["dead_letter_duplicates"]
    print(f"{kind:<9} {fraction:>8.0%} {show(consumed, ',.0f'):>10} {show(latency.get('p50'), '.1f'):>8} "
          f"{show(latency.get('p99'), '.1f'):>8} {show(produce_p99(summary), '.1f'):>11} {totals['rejected']:>8,} "
          f"{totals['archived']:>8,} {show(dead, ','):>13} {show(missing, ','):>7} {show(duplicates, ','):>5}")
    label = f"{kind} {fraction:.0%}"
    if info["status"] != "completed":
        failed.append(f"{label}: {info['status']}")
        continue
    if not all(group["closes"] and group["lost"] == 0 for group in info["account"].values()):
        failed.append(f"{label}: the account does not close")
    expected = totals["rejected"] + totals["archived"] if kind != "off" else 0
    if (dead, missing, duplicates) != (expected, 0, 0):
        failed.append(f"{label}: dead-lettered {dead}, missing {missing}, duplicates {duplicates} (expected {expected})")
    if fraction and not totals["rejected"]:
        failed.append(f"{label}: nothing was rejected")

print()
if status != 0:
    failed.append(f"the campaign exited {status}")
if failed:
    print("FAILED:\n  " + "\n  ".join(failed))
    sys.exit(1)
print("every rejected record was in the dead-letter topic exactly once where there was one, and in no topic where not")
EOF
