"""The very first summary: a run that starts dimster's Spark server as it begins and warms it with a
made-up run's summary (the default) against one whose summary starts it (DIMSTER_SPARK_AHEAD=0),
paired round by round, each side first every other round, the server stopped before each of their
runs; then, last in each round, a run whose server is already warm (`warm`: the round's earlier
summaries ran on it). Per run: the wait from its `run_ended` event to its report on disk, and its
measured e2e p99 and publish p99 (summary.json), to show that the server's start and warm-up beside the
load leave the run's own figures within their noise.

    .venv/bin/python scripts/bench/first_summary.py [--env local] [--repeat 5] [-w WORKLOAD] [-s KEY=VALUE ...]
        [--sides ahead,by the summary,warm]

`-s` overrides workload keys as `dimster run -s` does (`-s durationSeconds=600`: a 10-minute run).
`--sides warm` runs warm runs only: the server must then be warm before the first (the state folder's
server, left running by an earlier pass).

The runs use ENV's cluster (brought up by the first run if it is down) and the state folder of
DIMSTER_STATE_DIR (dimster's default otherwise): its Spark server is stopped before each cold run and
left stopped at the end of a pass with cold runs."""

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from common import ROOT, dimster  # beside this script

SIDES = {"ahead": "1", "by the summary": "0", "warm": "1"}  # side -> DIMSTER_SPARK_AHEAD
COLD = ("ahead", "by the summary")  # the sides whose runs begin with the server stopped


def one_run(env_name: str, workload: Path, results: Path, side: str, overrides: list[str]) -> dict[str, float]:
    """A run of `side`: its wait and its figures."""
    env = {**os.environ, "DIMSTER_SPARK_AHEAD": SIDES[side]}
    stopped = dimster(env, "spark", "stop") if side in COLD else None
    if stopped is not None and stopped.returncode:
        sys.exit(stopped.stderr)
    before = set(results.iterdir()) if results.exists() else set()
    sets = [arg for override in overrides for arg in ("-s", override)]
    result = dimster(env, "run", env_name, "-w", str(workload), *sets, "--results", str(results))
    if result.returncode:
        sys.exit(result.stderr + result.stdout)
    [bundle] = set(results.iterdir()) - before
    events = [json.loads(line) for line in (bundle / "events.jsonl").read_text().splitlines()]
    ended = next(e["time"] for e in events if e["event"] == "run_ended")
    latency = json.loads((bundle / "summary" / "summary.json").read_text())["latency_ms"]
    return {
        "wait_s": (bundle / "report.html").stat().st_mtime - ended,
        "e2e_p99_ms": latency["e2e"]["p99"],
        "publish_p99_ms": latency["publish"]["p99"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="local")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("-w", "--workload", type=Path, default=ROOT / "run" / "workloads" / "quickstart.yaml")
    parser.add_argument("-s", "--set", dest="overrides", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--sides", default=",".join(SIDES), help="of: " + ", ".join(SIDES))
    args = parser.parse_args()
    sides = [side for side in SIDES if side in args.sides.split(",")]
    if not sides or len(sides) != len(set(args.sides.split(","))):
        parser.error(f"--sides {args.sides}: name one or more of {', '.join(SIDES)}")
    results = Path(tempfile.mkdtemp(prefix="dimster-first-summary-"))
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    try:
        for round_ in range(args.repeat):
            order = [*(COLD if round_ % 2 == 0 else reversed(COLD)), "warm"]
            for side in (side for side in order if side in sides):
                figures = one_run(args.env, args.workload.resolve(), results, side, args.overrides)
                runs[side].append(figures)
                print(f"round {round_ + 1}, {side}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()))
    finally:
        if set(sides) & set(COLD):  # a pass of warm runs only leaves the server it found
            dimster(dict(os.environ), "spark", "stop")
    print(f"medians of {args.repeat}:")
    print(f"{'server started':<16} {'wait s':>8} {'e2e p99 ms':>11} {'publish p99 ms':>15}")
    for side, of_side in runs.items():
        medians = [statistics.median(f[key] for f in of_side) for key in ("wait_s", "e2e_p99_ms", "publish_p99_ms")]
        print(f"{side:<16} {medians[0]:>8.1f} {medians[1]:>11.1f} {medians[2]:>15.1f}")
    print(f"results: {results}")


if __name__ == "__main__":
    main()
