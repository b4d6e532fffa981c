"""`dimster tune` against a grid campaign over the same levers, for the three limits of
docs/share-groups.md (a lock budget, processing, record_limit fetch waits), on one environment in one
sitting: for each case the tuner's one run, then the grid's runs (run/campaigns/tuning-*.yaml), each
timed on the wall clock. The grid's answer is its cheapest point that meets the goal, by the tuner's
own lever costs (dimster/tuning/levers.py); the two agree when they change the same levers and the
tuner's values are no dearer than the grid's (the grid can only land on its own values).

    .venv/bin/python scripts/bench/tune_vs_grid.py [--env ENV] [--cases locks,processing,fetch-waits] [--out DIR]

Prints one markdown table (docs/tuning.md) and the host's load average before and after each part.
Needs each case's environment running (ENVIRONMENTS: `local`, and `localBeefy` for the fetch waits,
unless --env names one for all); it sends load only there, and each run stops by itself."""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from dimster.tuning.levers import parse_lever  # noqa: E402
from dimster.tuning.plan import lever_values  # noqa: E402
from dimster.workload.model import load_workload  # noqa: E402

GOAL = "consumed.rate >= 0.95 * produced.rate"
LOCKS = "groupConfig.share.partition.max.record.locks"
MODE = "kafkaConfig.shareConsumerConfig.share.acquire.mode"
CASES = {  # case -> the levers both the tuner and the grid may move
    "locks": [LOCKS, "consumersPerGroup"],
    "processing": ["consumerProcParallelism", "consumersPerGroup"],
    "fetch-waits": [MODE, "consumersPerGroup"],
}
# A case's environment unless --env names one for all: the fetch-wait stall needs brokers to rotate
# over (docs/scenarios/share-record-limit-stall.md), so three.
ENVIRONMENTS = {"locks": "local", "processing": "local", "fetch-waits": "localBeefy"}


def dimster(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "scripts" / "dimster"), *args], capture_output=True, text=True, cwd=REPO)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def tuned(env: str, case: str, out: Path) -> dict:
    workload = REPO / "run" / "workloads" / "tuning" / f"{case}.yaml"
    levers = [arg for key in CASES[case] for arg in ("--lever", key)]
    begun = time.monotonic()
    result = dimster("tune", env, "-w", str(workload), "--goal", GOAL, *levers, "--json", "--no-summary",
                     "--results", str(out / f"tune-{case}"))  # fmt: skip
    seconds = time.monotonic() - begun
    if result.returncode not in (0, 10):
        raise SystemExit(f"dimster tune {case} failed ({result.returncode}): {result.stderr[-2000:]}")
    path = json.loads(result.stdout)
    return {"seconds": seconds, "met": path["met"], "changes": path["changes"], "steps": len(path["steps"])}


def grid(env: str, case: str, out: Path) -> dict:
    begun = time.monotonic()
    campaign = REPO / "run" / "campaigns" / f"tuning-{case}.yaml"
    result = dimster("campaign", env, "-c", str(campaign), "--results", str(out / f"grid-{case}"))
    seconds = time.monotonic() - begun
    if result.returncode != 0:
        raise SystemExit(f"dimster campaign {case} failed ({result.returncode}): {result.stderr[-2000:]}")
    [folder] = [p for p in (out / f"grid-{case}").iterdir() if p.is_dir()]
    with open(folder / "campaign" / "summary" / "points.csv") as f:
        points = list(csv.DictReader(f))
    return {"seconds": seconds, "runs": len(points), "points": points}


def cheapest_meeting(case: str, points: list[dict]) -> tuple[dict | None, list[tuple[dict, float, float]]]:
    """The grid's point that meets the goal at the least cost from the workload's own values, and every
    point with its consumed and produced rates."""
    w = load_workload(REPO / "run" / "workloads" / "tuning" / f"{case}.yaml")
    now = lever_values(w, {})
    levers = {key: parse_lever(key, now) for key in CASES[case]}
    rated, meeting = [], []
    for point in points:
        values = {key: point[key] for key in CASES[case]}
        consumed, produced = float(point["consumed_msgs_per_s_mean"]), float(point["produced_msgs_per_s_mean"])
        rated.append((values, consumed, produced))
        if consumed >= 0.95 * produced:
            cost = sum(lever.cost_of(now[key], _typed(now[key], values[key])) for key, lever in levers.items())
            meeting.append((cost, values))
    best = min(meeting, key=lambda m: m[0])[1] if meeting else None
    return best, rated


def _typed(like: int | str, text: str) -> int | str:
    return int(float(text)) if isinstance(like, int) else text


def agree(case: str, tuner: dict, best: dict | None) -> bool:
    if best is None or not tuner["met"]:
        return best is None and not tuner["met"]
    now = lever_values(load_workload(REPO / "run" / "workloads" / "tuning" / f"{case}.yaml"), {})
    changed = {key for key, value in best.items() if _typed(now[key], value) != now[key]}
    if changed != set(tuner["changes"]):
        return False
    return all(
        tuner["changes"][key] == best[key]
        if isinstance(now[key], str)
        else int(tuner["changes"][key]) <= int(best[key])
        for key in changed
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default=None, help="one environment for every case (default: ENVIRONMENTS)")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="tune-vs-grid-"))
    rows = []
    for case in args.cases.split(","):
        env = args.env or ENVIRONMENTS[case]
        print(f"{case} on {env}: load before the tuner {load()}", file=sys.stderr, flush=True)
        tuner = tuned(env, case, out)
        print(f"{case}: tuner {tuner}; load before the grid {load()}", file=sys.stderr, flush=True)
        found = grid(env, case, out)
        best, rated = cheapest_meeting(case, found["points"])
        for values, consumed, produced in rated:
            print(f"  {values}: consumed {consumed:,.0f} of {produced:,.0f} msg/s", file=sys.stderr)
        print(f"{case}: grid {found['seconds']:.0f} s, best {best}; load after {load()}", file=sys.stderr, flush=True)
        changes = ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in tuner["changes"].items()) or "none"
        grid_best = ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in (best or {}).items()) or "none meets"
        rows.append(
            f"| {case} | 1 run, {tuner['steps']} step(s), {tuner['seconds'] / 60:.1f} min: "
            f"{changes} ({'met' if tuner['met'] else 'not met'}) | {found['runs']} runs, "
            f"{found['seconds'] / 60:.1f} min: {grid_best} | {'yes' if agree(case, tuner, best) else 'no'} |"
        )
    print("| case | dimster tune | the grid's cheapest point that meets the goal | agree |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    print(f"(results in {out}; {os.uname().nodename}, load after {load()})")


if __name__ == "__main__":
    main()
