#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite (lint first); exits with the suite's code.
# Arguments go to pytest: `scripts/test.sh -m unit` is the fast loop (no broker, no Spark, no browser).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
.venv/bin/ruff check dimster tests scripts
# The report tests open the HTML reports in Debian's headless Chromium.
if ! command -v chromium >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 ||
    echo "warning: could not install chromium (apt-get install chromium); the report browser tests will fail" >&2
fi
exec .venv/bin/python -m pytest "$@"
