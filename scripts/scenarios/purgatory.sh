#!/usr/bin/env bash
# The request-purgatory post (shared/seeds/004): a request a broker cannot answer yet (a fetch that
# finds no records, an acks=all Produce whose followers have not caught up) waits in a purgatory until
# it can be answered or times out. Many idle long-polling consumers keep one such request parked each.
#
# Three runs of run/workloads/purgatory.yaml: one share group of 10, 100 and 200 Java share consumers
# while one producer writes a steady 200 msg/s of 1 KiB (acks=all). Per run the script prints, from the
# run's summary: the brokers' purgatory sizes (ShareFetch, Fetch, Produce; the average over the
# measured scrapes, summed over brokers), their request latency (Produce and ShareFetch total time p99,
# the largest over brokers, from Kafka's own metrics) against the client-side latency (publish p99,
# end-to-end p50 and p99), and the records lost. It checks the direction:
#   - the ShareFetch purgatory grows with the consumers (idle consumers park their fetches there);
#   - at 200 consumers it holds at least one parked fetch for every two consumers;
#   - no record is lost in any run.
# It exits 1 when a run fails or a check does not hold.
#
# Usage: scripts/scenarios/purgatory.sh [ENV]    (default: local; on a cluster of 3 nodes, localBeefy,
# replication makes acks=all Produce requests wait in the Produce purgatory too)
# RESULTS_DIR (default results of the project): where the runs' folder goes (<time>-purgatory/<count>/). CONSUMERS (default
# "10 100 200"): the share consumers of each run. About 5 minutes on a 2-core machine. The cluster
# is left up, as after any run.
set -euo pipefail
shopt -s inherit_errexit
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dimster="$root/scripts/dimster"
python="$root/.venv/bin/python"
env="${1:-local}"
workload="$root/run/workloads/purgatory.yaml"
results="${RESULTS_DIR:-$root/results}"
mkdir -p "$results"
results="$(cd "$results" && pwd)"
read -r -a counts <<<"${CONSUMERS:-10 100 200}"

cleanup() { "$dimster" stop "$env" >/dev/null 2>&1 || true; }
trap cleanup EXIT

out="$results/$(date -u +%Y%m%dT%H%M%SZ)-purgatory"  # a folder per consumer count, one bundle each
bundles=()
for count in "${counts[@]}"; do
  echo "== $count share consumers"
  "$dimster" run "$env" -w "$workload" --results "$out/$count" --set consumersPerGroup="$count"
  bundles+=("$count=$(find "$out/$count" -mindepth 1 -maxdepth 1 -type d | head -1)")
done
trap - EXIT

echo
echo "== per run"
"$python" - "${bundles[@]}" <<'PY'
import json
import sys
from pathlib import Path

rows, failed = [], []
for argument in sys.argv[1:]:
    count, bundle = argument.split("=", 1)
    bundle = Path(bundle)
    info = json.loads((bundle / "run.json").read_text())
    if info.get("status") != "completed":
        failed.append(f"{count} consumers: {info.get('status')}")
        continue
    summary = json.loads((bundle / "summary" / "summary.json").read_text())
    brokers = summary.get("brokers") or {}
    purgatory = {}
    for row in brokers.get("purgatory", []):
        purgatory[row["operation"]] = purgatory.get(row["operation"], 0.0) + row["size_avg"]
    p99 = {}
    for row in brokers.get("requests", []):
        if row.get("p99_ms") is not None:
            p99[row["request"]] = max(p99.get(row["request"], 0.0), row["p99_ms"])
    latency = summary.get("latency_ms") or {}
    rows.append({
        "consumers": int(count),
        "sharefetch": purgatory.get("ShareFetch", 0.0),
        "fetch": purgatory.get("Fetch", 0.0),
        "produce": purgatory.get("Produce", 0.0),
        "produce_p99": p99.get("Produce"),
        "sharefetch_p99": p99.get("ShareFetch"),
        "publish_p99": (latency.get("publish") or {}).get("p99"),
        "e2e_p50": (latency.get("e2e") or {}).get("p50"),
        "e2e_p99": (latency.get("e2e") or {}).get("p99"),
        "lost": info["totals"]["lost"],
        "bundle": bundle.name,
    })


def ms(value):
    return f"{value:.1f}" if value is not None else "-"


print(f"{'consumers':>9} | {'purgatory: ShareFetch':>21} {'Fetch':>6} {'Produce':>7} | {'broker p99 ms: Produce':>22} "
      f"{'ShareFetch':>10} | {'client ms: publish p99':>22} {'e2e p50':>7} {'e2e p99':>7} | {'lost':>4}")
for r in rows:
    print(f"{r['consumers']:>9} | {r['sharefetch']:>21.1f} {r['fetch']:>6.1f} {r['produce']:>7.1f} | "
          f"{ms(r['produce_p99']):>22} {ms(r['sharefetch_p99']):>10} | {ms(r['publish_p99']):>22} "
          f"{ms(r['e2e_p50']):>7} {ms(r['e2e_p99']):>7} | {r['lost']:>4}")

checks = []
sizes = [r["sharefetch"] for r in rows]
if len(rows) >= 2:
    checks.append((f"the ShareFetch purgatory grows with the consumers ({', '.join(f'{s:.1f}' for s in sizes)})",
                   sizes == sorted(sizes) and sizes[-1] > sizes[0]))
largest = max(rows, key=lambda r: r["consumers"], default=None)
if largest:
    checks.append((f"{largest['consumers']} consumers park at least one fetch for every two "
                   f"({largest['sharefetch']:.1f} parked)", largest["sharefetch"] >= largest["consumers"] / 2))
checks += [(f"{r['consumers']} consumers: no record lost", r["lost"] == 0) for r in rows]
print()
for text, holds in checks:
    print(f"{'yes' if holds else 'NO':>3}: {text}")
print("\nbundles: " + ", ".join(r["bundle"] for r in rows))
if failed or not checks or not all(holds for _, holds in checks):
    print("FAILED" + "".join(f"\n  {f}" for f in failed))
    sys.exit(1)
PY
