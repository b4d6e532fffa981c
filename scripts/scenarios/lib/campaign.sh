# Sourced by the scenario scripts that run one campaign. The caller sets root, env, name and
# campaign; this sets dimster, python, results (RESULTS_DIR, default results/campaigns of the
# project) and scratch (a temporary folder, removed at exit), and defines run_campaign, which runs
# the campaign in the background (its arguments go to `dimster campaign`, e.g. --workers 3), so
# that Ctrl-C reaches the trap at once and the running point is
# stopped cleanly (`dimster stop`), then sets `status` (its exit code) and `folder` (the campaign
# folder it made, empty when none); require_summary then fails the script when that folder has no
# campaign summary.
dimster="$root/scripts/dimster"
python="$root/.venv/bin/python"
results="${RESULTS_DIR:-$root/results/campaigns}"
mkdir -p "$results"
results="$(cd "$results" && pwd)"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")"
pid=""

cleanup() {
  local code=$?
  trap - EXIT INT TERM
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    echo "== stopping the running point"
    "$dimster" stop "$env" --timeout 120 >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$scratch"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

run_campaign() {
  touch "$scratch/started"
  "$dimster" campaign "$env" -c "$campaign" "$@" --dry-run
  "$dimster" campaign "$env" -c "$campaign" --results "$results" "$@" &
  pid=$!
  status=0
  wait "$pid" || status=$?
  pid=""
  folder="$(find "$results" -maxdepth 1 -type d -name "*-$name" -newer "$scratch/started" | sort | tail -1)"
}

require_summary() {
  if [ -z "$folder" ] || [ ! -f "$folder/campaign/summary/runs.csv" ]; then
    echo "FAILED: the campaign (exit $status) left no summarized campaign folder in $results"
    exit 1
  fi
}
