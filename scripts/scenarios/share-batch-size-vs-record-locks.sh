#!/usr/bin/env bash
# The reference post's scenario, unattended, at a scale a 2-core machine sustains:
#   1. a share group keeps up with the producers;
#   2. fewer producers and a longer linger.ms make bigger record batches: still fine;
#   3. batch.size=32768 makes batches of ~64 records: the partition's in-flight budget
#      (group.share.partition.max.record.locks) now covers only locks/64 consumers, and
#      consumption falls behind;
#   4. fix 1: stop producing, drain, raise the budget with a broker redeploy, produce again: it copes;
#   5. fix 2: back to the small budget, then share.acquire.mode=record_limit: each consumer acquires
#      at most max.poll.records (30) of a 64-record batch, so the budget covers more consumers and it
#      copes again, at the price of each batch being fetched more than once.
# The small workload starts with a budget of 100 locks (4 consumers per partition want more than
# 100/64), where the post used 2000 locks for 50 consumers per partition: the same shape. Its
# clients are Kafka's Java clients (clientLibrary: java), which support share.acquire.mode.
#
# Usage: scripts/scenarios/share-batch-size-vs-record-locks.sh [ENV]    (default: local)
# STEP_SECONDS (default 60) sets how long each step runs before it is observed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dimster="$root/scripts/dimster"
env="${1:-local}"
step="${STEP_SECONDS:-60}"
workload="$root/run/workloads/run-test/run-sharegroup-proc-time-5ms-small.yaml"

observe() {  # what the run looks like now
  "$dimster" status "$env" | sed 's/^/    /'
}

cleanup() { "$dimster" stop "$env" >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "== start: $(basename "$workload") on $env, record-lock budget 100"
"$dimster" run "$env" -w "$workload" --detach --set brokerConfig.group.share.partition.max.record.locks=100
"$dimster" wait "$env" --until 'elapsedSeconds>15 and consRate>=0.95*targetRate and backlog<3000' --timeout $((step * 3)) \
  || echo "    not settled yet; going on"
sleep "$step"; observe

echo "== step 1: one producer, linger.ms=10 (bigger batches)"
"$dimster" run "$env" --modify --set producersPerTopic=1 kafkaConfig.producerConfig.linger.ms=10
sleep "$step"; observe

echo "== step 2: batch.size=32768, linger.ms=50 (batches of ~64 records)"
"$dimster" run "$env" --modify --set kafkaConfig.producerConfig.batch.size=32768 kafkaConfig.producerConfig.linger.ms=50
sleep "$step"; observe
if "$dimster" wait "$env" --until 'backlog>2000' --timeout "$step" >/dev/null; then
  echo "    consumption fell behind: the lock budget covers fewer consumers than the partition has"
else
  echo "    consumption kept up"
fi

echo "== fix 1: stop producing, drain without processing time, raise the budget to 400 locks"
"$dimster" run "$env" --modify --set producerRate=0 consumerProcMsMin=0 consumerProcMsMax=0
"$dimster" wait "$env" --until 'backlog<100' --timeout $((step * 4)) || echo "    backlog not drained yet; going on"
"$dimster" run "$env" --modify --set brokerConfig.group.share.partition.max.record.locks=400
"$dimster" wait "$env" --until 'elapsedSeconds>0' --timeout 10 >/dev/null
sleep 20  # the rolling redeploy runs in the background; the console shows the broker leave and return
"$dimster" run "$env" --modify --set producerRate=3000 consumerProcMsMin=5 consumerProcMsMax=5
sleep "$step"; observe
if "$dimster" wait "$env" --until 'consRate>=0.95*targetRate and backlog<3000' --timeout $((step * 2)) >/dev/null; then
  echo "    consumers cope again with the larger in-flight budget"
else
  echo "    consumers still behind"
fi

echo "== fix 2: the budget back to 100 locks, then share.acquire.mode=record_limit"
"$dimster" run "$env" --modify --set producerRate=0 consumerProcMsMin=0 consumerProcMsMax=0
"$dimster" wait "$env" --until 'backlog<100' --timeout $((step * 4)) || echo "    backlog not drained yet; going on"
"$dimster" run "$env" --modify --set brokerConfig.group.share.partition.max.record.locks=100
sleep 20  # the rolling redeploy again
"$dimster" run "$env" --modify --set kafkaConfig.shareConsumerConfig.share.acquire.mode=record_limit
"$dimster" run "$env" --modify --set producerRate 3000 consumerProcMsMin=5 consumerProcMsMax=5
sleep "$step"; observe
if "$dimster" wait "$env" --until 'maxPollRecords<=30 and consRate>=0.95*targetRate and backlog<3000' \
  --timeout $((step * 2)) >/dev/null; then
  echo "    consumers cope with record_limit: no poll holds more than max.poll.records (30)"
else
  echo "    consumers still behind"
fi

echo "== stop"
trap - EXIT
"$dimster" stop "$env"
