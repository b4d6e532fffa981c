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
"$python" "$root/scripts/scenarios/dead_letter_report.py" "$folder" "$status"
