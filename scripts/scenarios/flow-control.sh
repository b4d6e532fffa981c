#!/usr/bin/env bash
# The flow-control post (shared/seeds/000, KAFKA-7548): a consumer that pauses partitions for
# back-pressure, before and after the fix in kafka-clients 2.4.0. Before it, the records a consumer
# had fetched for a partition that is paused at the next poll were thrown away and fetched again.
#
# One campaign, run/campaigns/flow-control.yaml: the consumer's clientVersion 2.3.1 against 2.4.0
# (fetched from Maven Central), on the cluster's Kafka. Each point is a run of one Java consumer of
# 10 partitions that pauses a random 9 before every poll and takes one record per poll, while a
# librdkafka producer writes 1,000 msg/s of 1 KiB. Per version the script prints the consumed rate,
# the consumer's fetch requests per second, records per fetch and bytes fetched per byte consumed (from
# the campaign summary: the consumer's own metrics). Then it checks the post's direction with the fixed
# client:
#   - fewer fetch requests per record consumed (more records per fetch);
#   - fewer bytes fetched per byte consumed (nothing fetched twice);
#   - at least as many records consumed per second.
# It exits 1 when the campaign fails or a check does not hold, and leaves the campaign folder.
#
# Usage: scripts/scenarios/flow-control.sh [ENV]    (default: local)
# RESULTS_DIR (default results/campaigns of the project): where the campaign folder goes.
# About 3 minutes on a 2-core machine. The cluster is left up, as after any run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
env="${1:-local}"
name=flow-control
campaign="$root/run/campaigns/$name.yaml"
# shellcheck source=lib/campaign.sh
source "$root/scripts/scenarios/lib/campaign.sh"

echo "== $name on $env: kafka-clients 2.3.1 against 2.4.0, a consumer pausing 9 of its 10 partitions"
run_campaign
require_summary

echo
echo "== per version ($folder)"
"$python" - "$folder" "$status" <<'PY'
import sys
from pathlib import Path

import pandas as pd

folder, status = Path(sys.argv[1]), int(sys.argv[2])
runs = pd.read_csv(folder / "campaign" / "summary" / "runs.csv", dtype={"clientVersion.consumer": str})
VERSION = "clientVersion.consumer"

print(f"{'kafka-clients':>13} {'consumed/s':>10} {'fetches/s':>10} {'records/fetch':>13} "
      f"{'fetched B/consumed B':>20} {'status':>10}")
cells, failed = {}, []
for _, row in runs.sort_values(VERSION).iterrows():
    version = row[VERSION]
    if row["status"] != "completed":
        failed.append(f"kafka-clients {version}: {row['status']}")
        continue
    consumed, per_fetch, per_byte = row["consumed_msgs_per_s"], row["records_per_fetch"], row["rx_bytes_per_consumed_byte"]
    cells[version] = (consumed, consumed / per_fetch, per_fetch, per_byte)
    print(f"{version:>13} {consumed:>10.0f} {consumed / per_fetch:>10.0f} {per_fetch:>13.2f} {per_byte:>20.2f} "
          f"{row['status']:>10}")

checks = []
if {"2.3.1", "2.4.0"} <= set(cells):
    before, after = cells["2.3.1"], cells["2.4.0"]
    checks += [
        (f"records per fetch: {after[2]:.2f} with 2.4.0 against {before[2]:.2f} with 2.3.1", after[2] > before[2]),
        (f"bytes fetched per byte consumed: {after[3]:.2f} with 2.4.0 against {before[3]:.2f} with 2.3.1",
         after[3] < before[3]),
        (f"consumed msg/s: {after[0]:.0f} with 2.4.0, at least the {before[0]:.0f} with 2.3.1", after[0] >= before[0]),
    ]
else:
    checks.append(("both versions ran", False))
print()
for text, holds in checks:
    print(f"{'yes' if holds else 'NO':>3}: {text}")
print(f"\ncharts: {folder / 'campaign.html'}")
if failed or status or not all(holds for _, holds in checks):
    print("FAILED" + (f": campaign exit code {status}" if status else "") + "".join(f"\n  {f}" for f in failed))
    sys.exit(1)
PY
