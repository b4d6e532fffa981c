#!/usr/bin/env bash
# The consumer post (shared/seeds/003), its long-poll part: fetch.min.bytes and fetch.max.wait.ms trade
# latency for fewer, fuller fetches. A fetch returns once fetch.min.bytes are there, or after
# fetch.max.wait.ms; at a low rate a large fetch.min.bytes is never reached, so every fetch waits the
# whole fetch.max.wait.ms.
#
# One campaign, run/campaigns/long-poll.yaml: fetch.max.wait.ms {50, 200, 500} x fetch.min.bytes
# {1, 1048576}, each point a run of 3 Java consumers (one partition each) at 300 msg/s of 1 KiB records.
# Per point the script prints, from the campaign summary: e2e p50 and p99, the consumed rate and the
# consumers' records per fetch. Then it checks the direction:
#   - with fetch.min.bytes 1048576, e2e p50 grows with fetch.max.wait.ms and is at least a third of it
#     (a record waits for the fetch in flight: half the wait on average);
#   - with fetch.min.bytes 1048576, each fetch brings more records than with 1, at every fetch.max.wait.ms;
#   - with fetch.min.bytes 1, e2e p50 stays below 50 ms whatever fetch.max.wait.ms (nothing waits);
#   - every point consumes what is produced (within 5 % of 300 msg/s): the wait costs latency, not throughput.
# It exits 1 when the campaign fails or a check does not hold, and leaves the campaign folder.
#
# Usage: scripts/scenarios/long-poll.sh [ENV]    (default: local)
# RESULTS_DIR (default results/campaigns of the project): where the campaign folder goes.
# About 6 minutes on a 2-core machine. The cluster is left up, as after any run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
env="${1:-local}"
name=long-poll
campaign="$root/run/campaigns/$name.yaml"
# shellcheck source=lib/campaign.sh
source "$root/scripts/scenarios/lib/campaign.sh"

echo "== $name on $env: fetch.max.wait.ms x fetch.min.bytes, 3 Java consumers at 300 msg/s"
run_campaign
require_summary

echo
echo "== per point ($folder)"
"$python" - "$folder" "$status" <<'PY'
import sys
from pathlib import Path

import pandas as pd

folder, status = Path(sys.argv[1]), int(sys.argv[2])
runs = pd.read_csv(folder / "campaign" / "summary" / "runs.csv")
WAIT, MIN_BYTES = "kafkaConfig.consumerConfig.fetch.max.wait.ms", "kafkaConfig.consumerConfig.fetch.min.bytes"
RATE = 300

print(f"{'fetch.max.wait.ms':>17} {'fetch.min.bytes':>15} {'e2e p50 ms':>10} {'e2e p99 ms':>10} "
      f"{'consumed/s':>10} {'records/fetch':>13} {'status':>10}")
cells, failed = {}, []
for _, row in runs.sort_values([MIN_BYTES, WAIT]).iterrows():
    wait, min_bytes = int(row[WAIT]), int(row[MIN_BYTES])
    per_fetch = row["records_per_fetch"]  # the consumers' Java metrics, as in a run's summary
    print(f"{wait:>17} {min_bytes:>15} {row['e2e_p50_ms']:>10.1f} {row['e2e_p99_ms']:>10.1f} "
          f"{row['consumed_msgs_per_s']:>10.0f} {per_fetch:>13.1f} {row['status']:>10}")
    if row["status"] != "completed":
        failed.append(f"fetch.max.wait.ms {wait}, fetch.min.bytes {min_bytes}: {row['status']}")
        continue
    cells[(min_bytes, wait)] = (row["e2e_p50_ms"], per_fetch, row["consumed_msgs_per_s"])

checks = []
waits = sorted({wait for _, wait in cells})
big = [cells[(1048576, w)][0] for w in waits if (1048576, w) in cells]
checks.append((f"fetch.min.bytes 1048576: e2e p50 grows with fetch.max.wait.ms ({', '.join(f'{p:.0f}' for p in big)} ms)",
               len(big) == len(waits) and big == sorted(big)))
for wait in waits:
    if (1048576, wait) in cells:
        p50 = cells[(1048576, wait)][0]
        checks.append((f"fetch.min.bytes 1048576, fetch.max.wait.ms {wait}: e2e p50 {p50:.0f} ms is at least a third of the wait",
                       p50 >= wait / 3))
    if (1048576, wait) in cells and (1, wait) in cells:
        full, eager = cells[(1048576, wait)][1], cells[(1, wait)][1]
        checks.append((f"fetch.max.wait.ms {wait}: {full:.1f} records per fetch with 1048576 against {eager:.1f} with 1",
                       full > eager))
    if (1, wait) in cells:
        p50 = cells[(1, wait)][0]
        checks.append((f"fetch.min.bytes 1, fetch.max.wait.ms {wait}: e2e p50 {p50:.1f} ms below 50", p50 < 50))
for (min_bytes, wait), (_, _, consumed) in sorted(cells.items()):
    checks.append((f"fetch.min.bytes {min_bytes}, fetch.max.wait.ms {wait}: consumed {consumed:.0f} msg/s, "
                   f"within 5 % of {RATE}", abs(consumed - RATE) <= 0.05 * RATE))
print()
for text, holds in checks:
    print(f"{'yes' if holds else 'NO':>3}: {text}")
print(f"\ncharts: {folder / 'campaign.html'}")
if failed or status or not all(holds for _, holds in checks):
    print("FAILED" + (f": campaign exit code {status}" if status else "") + "".join(f"\n  {f}" for f in failed))
    sys.exit(1)
PY
