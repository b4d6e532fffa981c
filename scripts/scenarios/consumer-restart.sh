#!/usr/bin/env bash
# The consumer post (shared/seeds/003), its static-membership part: restarting one member of a consumer
# group (a deploy, a crash-loop) makes the group rebalance, unless the member is a static one whose
# group.instance.id the broker recognizes when it comes back within session.timeout.ms.
#
# Two runs of run/workloads/consumer-restart.yaml (3 librdkafka consumers on 6 partitions, 2,000 msg/s):
# one with dynamic members, one with `staticMembership=true`. In each, 20 s into the load, one member is
# restarted live (`--set restartConsumers=1`: it closes its Kafka client and starts a new one with the
# same client id); the run goes on 25 s more and stops. From each bundle's events (every member's
# rebalance callbacks: consumer_assigned / consumer_revoked / consumer_lost) and metrics the script
# prints the other members told of a rebalance, the partitions assigned to them, the seconds until the
# group settled again, and the group's consumption before and right after the restart.
# It checks the direction: the dynamic restart tells other members (their partitions are revoked and
# assigned again, eager protocol); the static one tells none. It exits 1 when that does not hold.
#
# Usage: scripts/scenarios/consumer-restart.sh [ENV] [CHART.png]    (default: local, no chart)
# CLIENT_LIBRARY (default librdkafka): java runs Kafka's Java consumers instead.
# About 2 minutes. The cluster is left up, as after any run.
set -euo pipefail
shopt -s inherit_errexit  # a failing step inside one_run's $(...) stops the script
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dimster="$root/scripts/dimster"
python="$root/.venv/bin/python"
env="${1:-local}"
chart="${2:-}"
workload="$root/run/workloads/consumer-restart.yaml"
library="${CLIENT_LIBRARY:-librdkafka}"

cleanup() { "$dimster" stop "$env" >/dev/null 2>&1 || true; }
trap cleanup EXIT

one_run() {  # one_run STATIC: prints the run's bundle folder
  "$dimster" run "$env" -w "$workload" --detach --no-summary --json \
    --set staticMembership="$1" clientLibrary="$library" >/dev/null
  "$dimster" wait "$env" --until "elapsedSeconds>20" --timeout 120 >/dev/null
  "$dimster" run "$env" --modify --set restartConsumers=1 >&2
  "$dimster" wait "$env" --until "elapsedSeconds>45" --timeout 120 >/dev/null
  local bundle
  bundle="$("$dimster" status "$env" --json | "$python" -c 'import json, sys; print(json.load(sys.stdin)["results"])')"
  "$dimster" stop "$env" >/dev/null
  echo "$bundle"
}

echo "== dynamic members: restart one"
dynamic="$(one_run false)"
echo "== static members: restart one"
static="$(one_run true)"
trap - EXIT

echo
echo "== what the restart did ($library)"
"$python" "$root/scripts/scenarios/consumer_restart.py" "$dynamic" "$static" ${chart:+"$chart"}
