"""Where the suite's minutes go: each tier of scripts/test.sh with its ten slowest tests (their share of
the tier's test time, and their CPU seconds), then its ten that used the most CPU. Reads the JSON each
tier's pytest session wrote (DIMSTER_TEST_TIMES, tests/times.py: per test id, the seconds of set-up,
call and tear-down, and the CPU seconds of its processes). On a busy host wall seconds say as much of
a test's neighbours as of the test; its CPU is what it costs the suite.

    python scripts/suite_times.py FOLDER TIER [TIER ...]      # FOLDER/TIER.json for each tier
"""

import json
import sys
from pathlib import Path

SHOWN = 10


def lines(tier: str, times: dict[str, dict[str, float]]) -> list[str]:
    seconds, cpu = times["seconds"], times.get("cpu", {})
    total, total_cpu = sum(seconds.values()), sum(cpu.values())
    if not total:
        return []
    slowest = sorted(seconds.items(), key=lambda item: item[1], reverse=True)[:SHOWN]
    head = f"== slowest of tier {tier}: {len(seconds)} tests, {total:,.0f} s of test time (on all its workers)"
    if total_cpu:
        head += f", {total_cpu:,.0f} s of CPU"
    out = [head, *(f"  {s:7.1f} s {s / total:6.1%} {_cpu(cpu.get(test))}  {test}" for test, s in slowest)]
    if total_cpu:
        most = sorted(cpu.items(), key=lambda item: item[1], reverse=True)[:SHOWN]
        out.append(f"== most CPU of tier {tier}: {total_cpu:,.0f} s of CPU in all")
        for test, c in most:
            out.append(f"  {c:7.1f} s {c / total_cpu:6.1%} of CPU, {seconds.get(test, 0.0):7.1f} s  {test}")
    return out


def _cpu(seconds: float | None) -> str:
    return "          " if seconds is None else f"{seconds:6.1f} CPU"


def main(folder: str, *tiers: str) -> None:
    for tier in tiers:
        path = Path(folder) / f"{tier}.json"
        if path.exists():
            print("\n".join(lines(tier, json.loads(path.read_text()))))


if __name__ == "__main__":
    main(*sys.argv[1:])
