#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite (lint first); exits with the suite's code.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
.venv/bin/ruff check dimster tests scripts
exec .venv/bin/python -m pytest "$@"
