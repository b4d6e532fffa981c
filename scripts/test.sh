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
exec .venv/bin/python -m pytest "$@"
