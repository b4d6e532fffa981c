#!/usr/bin/env bash
# Idempotent setup: a JDK 17+ and Maven (installed with apt-get on Debian/Ubuntu when they are missing
# and we are root or have passwordless sudo), .venv with dimster and its dev extra, then the Kafka jars
# for the pinned version. A second run on a set-up machine only checks, and takes seconds.
# Other tools' output (apt-get, pip) goes to .venv/setup.log and is shown only when a step fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say() { echo "dimster setup: $*" >&2; }

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  say "Python 3.11+ is required as '$python' (set PYTHON=/path/to/python3.11)"
  exit 1
fi

mkdir -p .venv
log=.venv/setup.log
: >"$log"

quietly() {  # runs a command with its output in the log; on failure shows the end of that output and stops
  local before
  before="$(wc -l <"$log")"
  if ! "$@" >>"$log" 2>&1; then
    tail -n "+$((before + 1))" "$log" | tail -n 40 >&2
    say "'$*' failed (full output: $log)"
    exit 1
  fi
}

java_major() {  # major version of the java dimster will use ($JAVA_HOME first, as dimster does); 0 if none
  local java=java
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then java="$JAVA_HOME/bin/java"; fi
  local version
  version="$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)" || true
  echo "${version:-0}"
}

# What the system lacks (a JDK 17+, Maven, Python's venv module, which Debian ships apart), as words
# and as Debian/Ubuntu packages.
needed=()
packages=()
if [ "$(java_major)" -lt 17 ]; then needed+=("a JDK 17+ (java)"); packages+=(openjdk-17-jdk-headless); fi
if ! command -v mvn >/dev/null 2>&1; then needed+=("Maven (mvn)"); packages+=(maven); fi
if [ ! -x .venv/bin/python ] && ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
  needed+=("Python's venv module"); packages+=(python3-venv)
fi

if [ ${#needed[@]} -gt 0 ]; then
  what="$(printf '%s, ' "${needed[@]}")"
  what="${what%, }"
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo -n)
  if ! command -v apt-get >/dev/null 2>&1; then
    say "missing $what: install them with the system's package manager (macOS: brew install openjdk@17 maven), then run scripts/setup.sh again"
    exit 1
  fi
  if [ ${#sudo[@]} -gt 0 ] && ! sudo -n true 2>/dev/null; then
    say "missing $what: install them (sudo apt-get install ${packages[*]}), then run scripts/setup.sh again"
    exit 1
  fi
  quietly "${sudo[@]}" apt-get update
  # JDK 17 where the release has it, else the release's default JDK (21 on Debian 13).
  if [[ " ${packages[*]} " == *" openjdk-17-jdk-headless "* ]] &&
    ! apt-cache policy openjdk-17-jdk-headless 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    packages=("${packages[@]/openjdk-17-jdk-headless/default-jdk-headless}")
  fi
  say "installing ${packages[*]} with apt-get (missing $what; output in $log)"
  quietly "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}"
  if [ "$(java_major)" -lt 17 ]; then
    say "java is still older than 17 after the install: install a JDK 17+ and set JAVA_HOME to it"
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import pip' 2>/dev/null; then
  quietly "$python" -m venv .venv
fi
# Reinstall only when the project definition changed since the last install.
stamp=.venv/.dimster-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  say "installing dimster and its dependencies into .venv (output in $log)"
  quietly .venv/bin/python -m pip install --upgrade pip
  quietly .venv/bin/python -m pip install -e '.[dev]'
  touch "$stamp"
fi
# dimster's bytecode, once: a host that sets PYTHONDONTWRITEBYTECODE otherwise compiles
# its 150 modules in every process (0.3 s of CPU each: every command, coordinator and agent). A module
# edited later is compiled from its source, as without this.
.venv/bin/python -m compileall -q dimster

.venv/bin/dimster kafka fetch
# The reports' plotly.js: its cartesian bundle, a third of the full one, fetched once with npm into the
# cache (dimster/report/plotly_js.py); without npm a report embeds the full bundle.
.venv/bin/python -c 'from dimster.report.plotly_js import plotly_js; plotly_js()'
