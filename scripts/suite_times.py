"""The slowest tests of each tier of scripts/test.sh, with their share of the tier: where the suite's
minutes go. Reads the JSON each tier's pytest session wrote (DIMSTER_TEST_TIMES: test id -> seconds of
set-up, call and tear-down).

    python scripts/suite_times.py FOLDER TIER [TIER ...]      # FOLDER/TIER.json for each tier
"""

import json
import sys
from pathlib import Path

SHOWN = 10


def lines(tier: str, seconds: dict[str, float]) -> list[str]:
    total = sum(seconds.values())
    if not total:
        return []
    slowest = sorted(seconds.items(), key=lambda item: item[1], reverse=True)[:SHOWN]
    head = f"== slowest of tier {tier}: {len(seconds)} tests, {total:,.0f} s of test time (on all its workers)"
    return [head, *(f"  {s:7.1f} s {s / total:6.1%}  {test}" for test, s in slowest)]


def main(folder: str, *tiers: str) -> None:
    for tier in tiers:
        path = Path(folder) / f"{tier}.json"
        if path.exists():
            print("\n".join(lines(tier, json.loads(path.read_text()))))


if __name__ == "__main__":
    main(*sys.argv[1:])
