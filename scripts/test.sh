#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite (lint first, the type check beside the kafka tier, or
# first for a selection); exits with the suite's code.
# Arguments go to pytest: `scripts/test.sh -m unit` is the fast loop (no broker, no Spark, no browser).
#
# The whole suite runs in tiers, each a pytest session of its own: kafka on three workers and, beside
# it, the type check, unit (on two workers), spark and browser one after another (their output is
# printed once the kafka tier ends; lint has run before any). A Kafka test spends much of its time waiting on Kafka
# (heartbeats, lock time-outs, drains), and the other tiers, which use no Kafka, take the CPU it leaves:
# they run at nice 9 while the kafka tier, the suite's critical path, runs, and get their priority
# back once it ends (scripts/priority.py, as root; beside a busy host they would crawl). Measured on
# one quiet host (docs/testing.md): at equal priority on two workers the kafka tier took 1,030 s; the
# others at nice 10, 949 s; on three workers, 816 s (a third worker without the nice gained 9 %).
# Each session and worker has its own warm clusters and ports; a test module runs whole on one worker,
# and modules that share a cluster run on the same one (tests/conftest.py). Every tier runs, and the
# exit code is the first failure's in tier order.
# Tests run in a random order (pytest-randomly); each tier prints its seed at the top, and
# `--randomly-seed=N` replays that order. The last lines name each tier's ten slowest tests with their
# share of the tier's test time and their CPU, and its ten that used the most CPU (scripts/suite_times.py,
# tests/times.py), then the time of each tier and the total.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
started=$SECONDS
scripts/setup.sh
.venv/bin/ruff check dimster tests scripts
typecheck() { .venv/bin/mypy dimster; }  # settings in pyproject.toml's [tool.mypy]
# Debian packages the tests use: Chromium opens the HTML reports, libfaketime skews an agent's clock,
# iproute2 makes the network namespaces agents run in, Prometheus scrapes a run (`dimster monitor`),
# podman (with runc) is the Docker-compatible daemon of the container tests, mmdebstrap builds dimster's base image.
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v faketime >/dev/null || missing+=(faketime)
command -v ip >/dev/null || missing+=(iproute2)
command -v prometheus >/dev/null || missing+=(prometheus)
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ ${#missing[@]} -gt 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >/dev/null 2>&1 ||
    echo "warning: could not install ${missing[*]} (apt-get install ${missing[*]}); tests that need them will fail" >&2
fi
# A run with arguments other than output options is the caller's own selection: one pytest session.
whole=1
for arg in "$@"; do
  case "$arg" in -v | -vv | -q | -x | -rA | --durations=*) ;; *) whole=0 ;; esac
done
if [ "$whole" = 0 ]; then
  typecheck
  exec .venv/bin/python -m pytest "$@"
fi

setup_seconds=$((SECONDS - started))
test_times="$(mktemp -d)"
trap 'rm -rf "$test_times"' EXIT
tier() {  # tier NAME PYTEST-ARGUMENTS...: one pytest session; its exit code and seconds go to files
  local name=$1 code=0 begun=$SECONDS
  shift
  echo
  echo "== tier $name"
  DIMSTER_TEST_TIMES="$test_times/$name.json" .venv/bin/python -m pytest "$@" || code=$?
  echo "$code" >"$test_times/$name.code"
  echo "$((SECONDS - begun))" >"$test_times/$name.seconds"
  return "$code"
}
summary() {  # each tier's slowest tests, then the suite's line; the exit code is the first failure's
  local times=("setup $setup_seconds s") status name code
  status=$(cat "$test_times/types.code" 2>/dev/null || echo 1)
  if [ "$status" -eq 0 ]; then times+=("type check $(cat "$test_times/types.seconds") s"); else times+=("type check failed"); fi
  for name in unit kafka spark browser; do
    [ -f "$test_times/$name.code" ] || continue
    code=$(cat "$test_times/$name.code")
    times+=("$name $(cat "$test_times/$name.seconds") s")
    if [ "$code" -ne 0 ] && [ "$status" -eq 0 ]; then status=$code; fi
  done
  echo
  .venv/bin/python scripts/suite_times.py "$test_times" unit kafka spark browser
  (IFS=','; echo "== suite: $((SECONDS - started)) s in all:${times[*]/#/ }")
  return "$status"
}

types() {  # the type check, first of the chain beside the kafka tier: 15 s of a fresh clone's critical path
  local code=0 begun=$SECONDS
  echo "== type check"
  typecheck || code=$?
  echo "$code" >"$test_times/types.code"
  echo "$((SECONDS - begun))" >"$test_times/types.seconds"
}
(renice -n 9 "$BASHPID" >/dev/null; export DIMSTER_SUITE_BESIDE=$BASHPID  # scripts/priority.py finds them by it
  types; tier unit -m unit -n 2 "$@" || true; tier spark -m spark "$@" || true; tier browser -m browser "$@" || true) \
  >"$test_times/beside.log" 2>&1 &
beside=$!
tier kafka -m kafka -n 3 "$@" || true
.venv/bin/python scripts/priority.py "$beside" 9 || true  # what is left of the chain: its priority back
wait "$beside" || true
cat "$test_times/beside.log"
summary || exit $?
