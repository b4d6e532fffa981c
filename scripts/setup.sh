#!/usr/bin/env bash
# Idempotent setup: .venv with dimster and its dev extra, then the Kafka jars for the pinned version.
# A second run on a set-up machine only checks, and takes seconds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "dimster setup: Python 3.11+ is required as '$python' (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "dimster setup: '$tool' not found; install a JDK 17+ and Maven (Debian: apt-get install openjdk-17-jdk-headless maven)" >&2
    exit 1
  fi
done

if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
# Reinstall only when the project definition changed since the last install.
stamp=.venv/.dimster-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[dev]'
  touch "$stamp"
fi

.venv/bin/dimster kafka fetch
