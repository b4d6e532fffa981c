#!/usr/bin/env bash
# Makes docs/report-screenshot.png from a real run: a short share-group workload on ENV (default
# local) with two live changes (producerRate, then consumersPerGroup), its Spark summary and HTML
# report, and that report opened in headless Chromium (down to its inputs, which name local paths).
# Takes about three minutes. The run's bundle is kept in a temporary folder, printed at the end; the
# cluster stays up, as after any run.
#
# Usage: scripts/report_screenshot.sh [ENV]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dimster="$root/scripts/dimster"
env="${1:-local}"
output="$root/docs/report-screenshot.png"
work="$(mktemp -d -t dimster-screenshot.XXXXXX)"

stop_run() { "$dimster" stop "$env" >/dev/null 2>&1 || true; }
trap stop_run EXIT

cat >"$work/report-screenshot.yaml" <<'YAML'
name: report-screenshot
topics: 1
partitionsPerTopic: 6
messageSize: 512
producersPerTopic: 2
producerRate: 1000
consumerType: SHARE_GROUP
groupsPerTopic: 1
consumersPerGroup: 3
consumerProcMsMin: 0
consumerProcMsMax: 2
warmupSeconds: 5
durationSeconds: 0              # until stopped
reportIntervalSeconds: 2
drainTimeoutSeconds: 30
kafkaConfig:
  producerConfig:
    linger.ms: 5
YAML

"$dimster" run "$env" -w "$work/report-screenshot.yaml" --detach --results "$work/results"
"$dimster" wait "$env" --until 'elapsedSeconds>30 and received>0' --timeout 180
"$dimster" run "$env" --modify --set producerRate=2000
"$dimster" wait "$env" --until 'elapsedSeconds>60' --timeout 180
"$dimster" run "$env" --modify --set consumersPerGroup=5
"$dimster" wait "$env" --until 'elapsedSeconds>90' --timeout 180
trap - EXIT
"$dimster" stop "$env"  # waits for the results, the summary and the report

report="$(echo "$work"/results/*/report.html)"
[ -f "$report" ] || { echo "report_screenshot: no report.html under $work/results" >&2; exit 1; }
"$root/.venv/bin/python" - "$report" "$output" <<'PY'
"""Opens the report offline in Debian's headless Chromium and saves the page down to its inputs
section: the workload, environment and command line name this machine's paths."""
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

report, output = Path(sys.argv[1]), Path(sys.argv[2])
with sync_playwright() as playwright:
    browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(report.resolve().as_uri(), wait_until="load")
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot svg.main-svg').length > 0", timeout=30_000)
    page.wait_for_timeout(500)  # plotly draws annotations right after the axes
    width, bottom = page.evaluate(
        "[document.documentElement.scrollWidth, document.querySelector('#inputs').getBoundingClientRect().top]"
    )
    page.screenshot(path=str(output), full_page=True, clip={"x": 0, "y": 0, "width": width, "height": bottom})
    browser.close()
PY
echo "wrote ${output#"$root"/} from the run in ${report%/report.html}"
