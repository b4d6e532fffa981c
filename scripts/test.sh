#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite (lint first); exits with the suite's code.
# Arguments go to pytest: `scripts/test.sh -m unit` is the fast loop (no broker, no Spark, no browser).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
.venv/bin/ruff check dimster tests scripts
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
# The whole suite (no arguments but output options): the unit tests run in a second pytest session
# beside the one that starts Kafka, Spark or a browser one test after another. Each session has its
# own scratch project, ports and state folder (tests/conftest.py); the exit code is the first failure's.
whole=1
for arg in "$@"; do
  case "$arg" in -v | -vv | -q | -x | -rA | --durations=*) ;; *) whole=0 ;; esac
done
if [ "$whole" = 0 ]; then
  exec .venv/bin/python -m pytest "$@"
fi
unit_log="$(mktemp "${TMPDIR:-/tmp}/dimster-unit-tests.XXXXXX")"
.venv/bin/python -m pytest -m unit "$@" >"$unit_log" 2>&1 &
unit_pid=$!
# a background job ignores Ctrl-C in a script: end it by its PID when the script ends early
trap 'kill "$unit_pid" 2>/dev/null || true; rm -f "$unit_log"' EXIT
status=0
.venv/bin/python -m pytest -m "not unit" "$@" || status=$?
unit_status=0
wait "$unit_pid" || unit_status=$?
echo
echo "== the unit tests, run beside the others (pytest -m unit): exit $unit_status"
cat "$unit_log"
if [ "$status" -ne 0 ]; then exit "$status"; fi
exit "$unit_status"
