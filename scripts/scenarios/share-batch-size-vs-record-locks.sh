#!/usr/bin/env bash
# The reference post's scenario, unattended, at a scale a 2-core machine sustains:
#   1. a share group keeps up with the producers;
#   2. fewer producers and a longer linger.ms make bigger record batches (observed, not judged);
#   3. batch.size=32768 makes batches of ~64 records: the partition's in-flight budget
#      (group.share.partition.max.record.locks) now covers only locks/64 consumers, and
#      consumption falls behind: below the target rate, with a growing backlog;
#   4. fix 1: stop producing, drain, raise the budget with a broker redeploy, produce again: it copes;
#   5. fix 2: back to the small budget, then share.acquire.mode=record_limit: each consumer acquires
#      at most max.poll.records (30) of a 64-record batch, so the budget covers more consumers and it
#      copes again, at the price of each batch being fetched more than once.
# The small workload starts with a budget of 100 locks (4 consumers per partition want more than
# 100/64), where the post used 2000 locks for 50 consumers per partition: the same shape. Its
# clients are Kafka's Java clients (clientLibrary: java), which support share.acquire.mode.
#
# Each outcome (keeps up, falls behind, copes again) is checked with `dimster wait --until` and printed
# with its numbers; the script exits 1 as soon as one does not happen, and stops the run either way.
#
# Usage: scripts/scenarios/share-batch-size-vs-record-locks.sh [ENV]    (default: local)
# STEP_SECONDS (default 60): how long each step runs before it is judged.
# PATIENCE_SECONDS (default 240): how long an outcome may take to show before the script gives up.
# BACKLOG_RECORDS (default 2000): the backlog that shows consumption fell behind, and by how much it
# must grow after that.
# WORKLOAD (default the small reference workload): another scale of it, e.g. for a smaller machine.
# RUN_OPTIONS: more options for the `dimster run` that starts it, e.g. "--no-summary" or "--results DIR".
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dimster="$root/scripts/dimster"
env="${1:-local}"
step="${STEP_SECONDS:-60}"
patience="${PATIENCE_SECONDS:-240}"
behind="${BACKLOG_RECORDS:-2000}"
workload="${WORKLOAD:-$root/run/workloads/run-test/run-sharegroup-proc-time-5ms-small.yaml}"
workload_key() {  # a key of the workload file, e.g. workload_key producerRate
  "$root/.venv/bin/python" -c '
import sys, yaml
value = yaml.safe_load(open(sys.argv[1]))
for key in sys.argv[2:]:
    value = value[key]
print(value)' "$workload" "$@"
}
rate="$(workload_key producerRate)"
max_poll="$(workload_key kafkaConfig shareConsumerConfig max.poll.records)"
keeps_up="targetRate>=0.95*$rate and consRate>=0.95*targetRate and backlog<3000"

field() {  # one field of the run's status
  "$dimster" status "$env" --json | "$root/.venv/bin/python" -c "import json, sys; print(json.load(sys.stdin)['$1'])"
}

numbers() {  # the numbers this story is about, on one line
  "$dimster" status "$env" --json | "$root/.venv/bin/python" -c '
import json, sys
s = json.load(sys.stdin)
batch = "%.0f" % s["batchRecordsAvg"] if s["batchRecordsAvg"] else "-"
print("    after {:.0f}s: target {:,.0f} msg/s, consumed {:,.0f} msg/s, backlog {:,}, records per producer batch {}, "
      "max records per poll {}".format(s["elapsedSeconds"], s["targetRate"], s["consRate"], s["backlog"], batch,
                                       s["maxPollRecords"]))'
}

fail() {
  echo "FAILED: $*"
  numbers || true
  exit 1
}

judge() {  # judge "what must hold" "how it is said" CONDITION: waits up to $patience for CONDITION
  if "$dimster" wait "$env" --until "$3" --timeout "$patience" >/dev/null; then
    echo "    $2"
    numbers
  else
    fail "$1 did not happen within ${patience}s ($3)"
  fi
}

after_a_step() {  # a condition that holds only once the current step has run for $step seconds
  echo "elapsedSeconds>$(field elapsedSeconds)+$step"
}

await_redeploy() {  # waits until the run's events show broker redeploy number $1 done
  local events
  events="$(field results)/events.jsonl"
  for _ in $(seq "$patience"); do
    if grep -q '"broker_redeploy_failed"' "$events"; then fail "the broker redeploy failed"; fi
    [ "$(grep -c '"broker_redeploy_done"' "$events")" -ge "$1" ] && return 0
    sleep 1
  done
  fail "broker redeploy $1 did not finish within ${patience}s"
}

drain() {  # stop producing and drain without processing time
  "$dimster" run "$env" --modify --set producerRate=0 consumerProcMsMin=0 consumerProcMsMax=0 >/dev/null
  judge "draining the backlog" "drained" "targetRate<1 and backlog<100"
}

cleanup() { "$dimster" stop "$env" >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "== start: $(basename "$workload") on $env, record-lock budget 100"
# shellcheck disable=SC2086  # RUN_OPTIONS is split into options
"$dimster" run "$env" -w "$workload" --detach ${RUN_OPTIONS:-} --set brokerConfig.group.share.partition.max.record.locks=100
judge "keeping up at the start" "keeps up: consumed at the target rate, small backlog" \
  "$(after_a_step) and $keeps_up"

echo "== step 1: one producer, linger.ms=10 (bigger batches)"
"$dimster" run "$env" --modify --set producersPerTopic=1 kafkaConfig.producerConfig.linger.ms=10
sleep "$step"
numbers

echo "== step 2: batch.size=32768, linger.ms=200 (batches of ~64 records)"
"$dimster" run "$env" --modify --set kafkaConfig.producerConfig.batch.size=32768 kafkaConfig.producerConfig.linger.ms=200
judge "falling behind after batch.size=32768" \
  "falls behind: consumed below the target rate, backlog over $behind" \
  "$(after_a_step) and targetRate>=0.95*$rate and consRate<0.9*targetRate and backlog>$behind"
backlog="$(field backlog)"
judge "a growing backlog after batch.size=32768" \
  "the backlog grows: the lock budget covers fewer consumers than the partition has" \
  "backlog>$backlog+$behind"

echo "== fix 1: stop producing, drain without processing time, raise the budget to 400 locks"
drain
"$dimster" run "$env" --modify --set brokerConfig.group.share.partition.max.record.locks=400
await_redeploy 1
"$dimster" run "$env" --modify --set producerRate=$rate consumerProcMsMin=5 consumerProcMsMax=5
judge "coping with 400 locks" "copes again with the larger in-flight budget" "$(after_a_step) and $keeps_up"

echo "== fix 2: the budget back to 100 locks, then share.acquire.mode=record_limit"
drain
"$dimster" run "$env" --modify --set brokerConfig.group.share.partition.max.record.locks=100
await_redeploy 2
"$dimster" run "$env" --modify --set kafkaConfig.shareConsumerConfig.share.acquire.mode=record_limit
"$dimster" run "$env" --modify --set producerRate $rate consumerProcMsMin=5 consumerProcMsMax=5
judge "coping with record_limit" "copes again with record_limit: no poll holds more than max.poll.records ($max_poll)" \
  "$(after_a_step) and $keeps_up and maxPollRecords<=$max_poll"

echo "== stop"
trap - EXIT
"$dimster" stop "$env"
