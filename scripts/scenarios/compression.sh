#!/usr/bin/env bash
# The compression post (shared/seeds/002): compression saves bytes and costs producer CPU. Kafka
# compresses a producer's record batches, so what a codec buys is fewer bytes sent, stored and
# replicated, paid for with CPU in the producer (and in the consumers that decompress).
#
# One campaign, run/campaigns/compression.yaml: the producer's client library {librdkafka, java} x
# compression.type {none, gzip, snappy, lz4, zstd}, each point a run of one producer (no consumers,
# so its worker's CPU is the producer's) sending 5,000 compressible records of 1 KiB per second. Per
# point the script prints, from the campaign summary: the payload bytes per byte the brokers took in
# for the run's topic (the compression achieved, from the brokers' own per-topic counters), the Java
# producer's compression-rate-avg (compressed per uncompressed byte of its batches), produced MB/s,
# the producer's CPU ms per MB and publish p99. Then it checks the direction:
#   - without compression the brokers take in about what the producer was handed (a ratio between
#     0.9 and 1.1: batches add their framing);
#   - every codec takes the brokers at least 1.5 times fewer bytes than none, with both libraries;
#   - gzip costs the producer more CPU per MB than none (reported, not judged: the codec's cost is a
#     small part of the producer's CPU per MB here, which is mostly dimster's own loop, and one run's
#     noise on 2 cores is of the same size).
# It exits 1 when the campaign fails or a byte check does not hold, and leaves the campaign folder
# (campaign.json, campaign.html with a chart per figure, one bundle per point).
#
# Usage: scripts/scenarios/compression.sh [ENV]    (default: local)
# RESULTS_DIR (default results/campaigns of the project): where the campaign folder goes.
# About 7 minutes on a 2-core machine. The cluster is left up, as after any run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
env="${1:-local}"
name=compression
campaign="$root/run/campaigns/$name.yaml"
# shellcheck source=lib/campaign.sh
source "$root/scripts/scenarios/lib/campaign.sh"

echo "== $name on $env: compression.type x the producer's client library, compressible records"
run_campaign
require_summary

echo
echo "== per point ($folder)"
"$python" - "$folder" "$status" <<'EOF'
import sys
from pathlib import Path

import pandas as pd

folder, status = Path(sys.argv[1]), int(sys.argv[2])
runs = pd.read_csv(folder / "campaign" / "summary" / "runs.csv")
LIBRARY, CODEC = "clientLibrary.producer", "kafkaConfig.producerConfig.compression.type"


def java_rate(bundle: str) -> float:
    """The Java producer's own compression-rate-avg over its measured statistics (librdkafka has none)."""
    path = folder / bundle / "metrics" / "client_stats"
    if not path.exists():
        return float("nan")
    stats = pd.read_parquet(path)
    rates = stats[(stats.role == "producer") & (stats.phase == "measure")].get("compression_rate_avg")
    rates = rates[rates > 0] if rates is not None else pd.Series(dtype=float)
    return float(rates.mean()) if len(rates) else float("nan")


def show(value: float, form: str) -> str:
    return "-" if pd.isna(value) else format(value, form)


print(f"{'library':<11} {'codec':<7} {'payload/broker byte':>19} {'java rate':>9} {'MB/s':>6} "
      f"{'CPU ms/MB':>9} {'publish p99 ms':>14} {'status':>10}")
cells, failed = {}, []
for _, row in runs.iterrows():
    library, codec, ratio = row[LIBRARY], row[CODEC], row["compression_ratio"]
    cpu = row["worker_producer_cpu_seconds_per_mb"] * 1000
    print(f"{library:<11} {codec:<7} {show(ratio, '.2f'):>19} {show(java_rate(row['bundle']), '.3f'):>9} "
          f"{show(row['produced_mb_per_s'], '.2f'):>6} {show(cpu, '.1f'):>9} {show(row['publish_p99_ms'], '.1f'):>14} "
          f"{row['status']:>10}")
    if row["status"] != "completed" or pd.isna(ratio):
        failed.append(f"{library} {codec}: {row['status']}, ratio {ratio}")
        continue
    cells[(library, codec)] = (ratio, cpu)

checks, reported = [], []
for library in ("librdkafka", "java"):
    none = cells.get((library, "none"))
    if none is None:
        continue
    checks.append((f"{library}, none: the brokers take in about the payload (ratio {none[0]:.2f}, 0.9 to 1.1)",
                   0.9 < none[0] < 1.1))
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        if (library, codec) in cells:
            ratio = cells[(library, codec)][0]
            checks.append((f"{library}, {codec}: {ratio / none[0]:.1f} times fewer bytes than none (>= 1.5)",
                           ratio >= 1.5 * none[0]))
    if (library, "gzip") in cells:
        gzip_cpu = cells[(library, "gzip")][1]
        reported.append((f"{library}, gzip costs more CPU per MB than none ({gzip_cpu:.1f} against "
                         f"{none[1]:.1f} ms; reported, not judged)", gzip_cpu > none[1]))
print()
for text, holds in [*checks, *reported]:
    print(f"{'yes' if holds else 'NO':>3}: {text}")
print(f"\ncharts: {folder / 'campaign.html'}")
if failed or status or not checks or not all(holds for _, holds in checks):
    print("FAILED" + (f": campaign exit code {status}" if status else "") + "".join(f"\n  {f}" for f in failed))
    sys.exit(1)
EOF
