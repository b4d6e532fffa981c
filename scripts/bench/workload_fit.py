"""Whether a workload fits its host: dimster's own load generator keeping up, run by run, at several sizes.

Runs WORKLOAD on ENV (its cluster brought up or reused) once per size and round, sizes alternating
within each round, and reads each run's own records: the measured phase's seconds and the seconds
run.json's `generator` judged saturated (the console's windows), the workers' wake-up wait share
(mean over the measured phase, and its worst 1-s report), the cores the worker processes used, the
rates, and lost. The host's load average is taken before each run.

    .venv/bin/python scripts/bench/workload_fit.py -w run/workloads/run-test/run-sharegroup-proc-time-5ms-small.yaml \\
        --size "partitionsPerTopic=6 producersPerTopic=6 producerRate=3000 consumersPerGroup=24" --size "" --repeat 3

A size is `--set` pairs laid over the workload ("" for the workload as it is)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
from common import ROOT, alternating  # beside this script


def one_run(env: str, workload: Path, size: str, seconds: int, results: Path) -> dict:
    before = os.getloadavg()
    sets = [*size.split(), f"durationSeconds={seconds}"]
    command = [sys.executable, "-m", "dimster", "run", env, "-w", str(workload), "--results", str(results)]
    done = subprocess.run([*command, "--no-summary", "--set", *sets], cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the run of size '{size}' failed:\n{done.stderr[-2000:]}")
    bundle = max(results.iterdir(), key=lambda p: p.stat().st_mtime)
    info = json.loads((bundle / "run.json").read_text())
    workers = pq.read_table(bundle / "metrics" / "workers").to_pandas().sort_values("end_time")
    measured = workers[workers.phase == "measure"]
    per_worker = []
    for _, rows in measured.groupby("worker"):
        span = rows.end_time.diff().dropna()
        waited = rows.wake_lag_ms_sum.iloc[1:] / 1000
        per_worker.append(
            (waited.sum() / span.sum(), float((waited / span).max()), rows.cpu_seconds.iloc[1:].sum() / span.sum())
        )
    generator = info["generator"]["measure"]
    totals = info["totals"]
    return {
        "size": size or "(as written)",
        "load_average_before": [round(x, 2) for x in before],
        "measured_seconds": generator["seconds"],
        "saturated_seconds": generator["saturated_seconds"],
        "wait_share_mean": round(max(w[0] for w in per_worker), 3),
        "wait_share_worst_second": round(max(w[1] for w in per_worker), 3),
        "worker_cores": round(sum(w[2] for w in per_worker), 2),
        "sent": totals["sent"],
        "received": totals["received"],
        "lost": totals["lost"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="local")
    parser.add_argument("-w", "--workload", type=Path, required=True)
    parser.add_argument("--size", action="append", help="--set pairs over the workload (repeatable)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=60, help="of the measured phase (durationSeconds)")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    sizes = args.size or [""]
    results = Path(tempfile.mkdtemp(prefix="dimster-workload-fit-"))
    workload = args.workload.resolve()
    rows = alternating(sizes, args.repeat, lambda size: one_run(args.env, workload, size, args.seconds, results))
    for size in sizes:
        mine = [r for r in rows if r["size"] == (size or "(as written)")]
        medians = {k: statistics.median(r[k] for r in mine) for k in ("saturated_seconds", "wait_share_mean")}
        print(f"{size or '(as written)'}: median saturated {medians['saturated_seconds']} s of the measured phase, "
              f"wait share {medians['wait_share_mean']:.1%}")  # fmt: skip
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
