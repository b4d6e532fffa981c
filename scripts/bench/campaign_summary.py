"""A 27-point campaign's summary on dimster's warm Spark server against a Spark driver of its own, as
every summary had before the server (issue 49). Runs a small campaign (3 x 3 x 3 points: producer rate,
share consumers, message size; 4 s of load each, no summary), then times `dimster summarize` of its
folder, the two sides paired round by round, each first every other round: `embedded` (the server
warm, one summary of the campaign done before the first round) and `own driver` (`--spark-master
local[*]`: a JVM that starts, loads Spark and compiles its code for this summary alone).

    .venv/bin/python scripts/bench/campaign_summary.py [--env local] [--repeat 5] [--campaign FOLDER]

--campaign reuses the folder of an earlier pass instead of running the points again. The server is the
one of DIMSTER_STATE_DIR (dimster's default state folder otherwise), left running at the end."""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml
from common import dimster  # beside this script

SIDES = {"embedded": "embedded", "own driver": "local[*]"}
CAMPAIGN = {
    "name": "summary-bench",
    "base": {
        "name": "summary-bench",
        "partitionsPerTopic": 3,
        "producersPerTopic": 1,
        "consumerType": "SHARE_GROUP",
        "warmupSeconds": 0,
        "durationSeconds": 4,
        "reportIntervalSeconds": 1,
        "drainTimeoutSeconds": 10,
    },
    "dimensions": [
        {"key": "producerRate", "values": [200, 400, 600]},
        {"key": "consumersPerGroup", "values": [1, 2, 3]},
        {"key": "messageSize", "values": [100, 500, 1000]},
    ],
}


def run_campaign(env_name: str, scratch: Path) -> Path:
    """The campaign's 27 points on ENV's cluster, without a summary; its folder."""
    file = scratch / "campaign.yaml"
    file.write_text(yaml.safe_dump(CAMPAIGN, sort_keys=False))
    results = scratch / "results"
    started = time.monotonic()
    result = dimster(dict(os.environ), "campaign", env_name, "-c", str(file), "--results", str(results), "--no-summary")
    if result.returncode:
        sys.exit(result.stderr + result.stdout)
    [folder] = list(results.iterdir())
    print(f"27 points run in {time.monotonic() - started:.0f} s: {folder}")
    return folder


def timed_summary(folder: Path, master: str) -> float:
    started = time.monotonic()
    result = dimster(dict(os.environ), "summarize", str(folder), "--spark-master", master)
    if result.returncode:
        sys.exit(result.stderr + result.stdout)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="local")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--campaign", type=Path, help="a campaign folder of an earlier pass")
    args = parser.parse_args()
    folder = args.campaign or run_campaign(args.env, Path(tempfile.mkdtemp(prefix="dimster-campaign-summary-")))
    print(f"first summary on the server (started or warmed by it): {timed_summary(folder, 'embedded'):.1f} s")
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    for round_ in range(args.repeat):
        for side in list(SIDES) if round_ % 2 == 0 else list(reversed(SIDES)):
            times[side].append(timed_summary(folder, SIDES[side]))
            print(f"round {round_ + 1}, {side}: {times[side][-1]:.1f} s")
    print(f"`dimster summarize` of the 27-point campaign, median of {args.repeat} (range):")
    for side, values in times.items():
        print(f"{side:<12} {statistics.median(values):6.1f} s ({min(values):.1f}-{max(values):.1f})")
    own, warm = statistics.median(times["own driver"]), statistics.median(times["embedded"])
    print(f"ratio embedded / own driver: {warm / own:.2f}")


if __name__ == "__main__":
    main()
