"""What a live consumer restart did to its group, from the bundles of scripts/scenarios/consumer-restart.sh:
per run, the members told of a rebalance besides the restarted one, the partitions assigned to them,
the seconds from the restarted member's revocation to the group's last assignment (until the group
settled) and the group's consumption in the seconds around the restart; then the direction shown.

Usage: .venv/bin/python scripts/scenarios/consumer_restart.py DYNAMIC_BUNDLE STATIC_BUNDLE [CHART.png]
Exit 1 when a dynamic restart told no other member, or a static one told any."""

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from dimster.report.page import Page

REBALANCE_EVENTS = ("consumer_assigned", "consumer_revoked", "consumer_lost")
AROUND = (-10, 20)  # seconds around the restart that the chart and the dip look at


@dataclass
class Restart:
    bundle: Path
    at: float  # epoch s of the restart
    restarted: str
    others_told: list[str]
    partitions_to_others: int
    settled_seconds: float
    consumed: pd.Series  # the group's consumed msg/s, per second of run time

    @property
    def load_started(self) -> float:
        return json.loads((self.bundle / "run.json").read_text())["load_started"]

    def dip(self) -> tuple[float, float]:
        """The median consumed msg/s in the 10 s before the restart, and the lowest second after it."""
        since = self.at - self.load_started
        before = self.consumed[(self.consumed.index >= since - 10) & (self.consumed.index < since)]
        after = self.consumed[(self.consumed.index >= since) & (self.consumed.index < since + 10)]
        return float(before.median()), float(after.min())


def read(bundle: Path) -> Restart:
    lines = (bundle / "modifications.jsonl").read_text().splitlines()
    [restart] = [m for m in map(json.loads, lines) if m["key"] == "restartConsumers"]
    events = [json.loads(line) for line in (bundle / "events.jsonl").read_text().splitlines()]
    stopping = next((e["time"] for e in events if e["event"] == "stopping"), float("inf"))
    after = [e for e in events if e["event"] in REBALANCE_EVENTS and restart["applied"] <= e["at"] < stopping]
    [restarted] = restart["clients"]
    others = [e for e in after if e["client"] != restarted]
    revoked = [e["at"] for e in after if e["client"] == restarted and e["event"] != "consumer_assigned"]
    assigned = [e["at"] for e in after if e["event"] == "consumer_assigned"]
    settled = max(assigned) - min(revoked) if revoked and assigned else float("nan")
    intervals = pd.read_parquet(bundle / "metrics" / "intervals")
    consumers = intervals[intervals.role == "consumer"]
    per_second = consumers.groupby(consumers.run_time_s.round().astype(int)).received.sum()
    return Restart(
        bundle=bundle,
        at=restart["applied"],
        restarted=restarted,
        others_told=sorted({e["client"] for e in others}),
        partitions_to_others=sum(e["partitions"] for e in others if e["event"] == "consumer_assigned"),
        settled_seconds=settled,
        consumed=per_second,
    )


def chart(runs: dict[str, Restart], out: Path) -> None:
    figure = go.Figure()
    for name, run in runs.items():
        since = run.at - run.load_started
        window = run.consumed[(run.consumed.index >= since + AROUND[0]) & (run.consumed.index <= since + AROUND[1])]
        figure.add_scatter(x=window.index - since, y=window.values, mode="lines+markers", name=name)
    figure.add_vline(x=0, line_dash="dot", annotation_text="restart of one member")
    figure.update_layout(
        width=900, height=380, xaxis_title="seconds from the restart", yaxis_title="group consumed msg/s"
    )
    page = Page("consumer restart")
    page.add(page.figure(figure))
    page.screenshot(out, 980, 440)


def main(dynamic: Path, static: Path, out: Path | None) -> int:
    runs = {"dynamic member": read(dynamic), "static member": read(static)}
    print("| membership | restarted | other members told | partitions assigned to them | s until settled | "
          "consumed msg/s before | lowest second after |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, run in runs.items():
        before, lowest = run.dip()
        told = ", ".join(run.others_told) or "none"
        print(f"| {name} | {run.restarted} | {told} | {run.partitions_to_others} | {run.settled_seconds:.2f} | "
              f"{before:,.0f} | {lowest:,.0f} |")  # fmt: skip
    if out:
        chart(runs, out)
    failures = []
    if not runs["dynamic member"].others_told:
        failures.append("the dynamic member's restart told no other member of a rebalance")
    if runs["static member"].others_told:
        failures.append("the static member's restart told other members of a rebalance")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) == 4 else None))
