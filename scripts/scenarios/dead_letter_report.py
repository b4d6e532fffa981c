"""The dead-letter scenario's table and checks, from a campaign folder of run/campaigns/dead-letter.yaml
(scripts/scenarios/dead-letter.sh runs it): `dead_letter_report.py FOLDER [CAMPAIGN_EXIT_CODE]`."""

import json
import sys
from pathlib import Path

import pandas as pd

folder, status = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0
runs = pd.read_csv(folder / "campaign" / "summary" / "runs.csv")


def produce_p99(bundle: Path) -> float | None:
    """The brokers' Produce p99 (ms; their JMX exporter gives seconds), the median over the measured
    phase's scrapes (the worst broker's); the dead-letter writes are Produce requests too."""
    brokers = pd.read_parquet(bundle / "metrics" / "brokers")
    rows = brokers[(brokers.metric == "kafka_network_request_totaltime_seconds") & (brokers.phase == "measure")]
    labels = rows.labels.map(dict)
    produce = rows[labels.map(lambda k: k.get("request") == "Produce" and k.get("percentile") == "0.99")]
    return 1000 * float(produce.groupby("broker").value.median().max()) if len(produce) else None


def show(value, form: str) -> str:
    return "-" if value is None or pd.isna(value) else format(value, form)


print(
    f"{'queue':<9} {'rejected':>8} {'consumed/s':>10} {'e2e p50':>8} {'e2e p99':>8} {'Produce p99':>11} "
    f"{'rejected':>8} {'archived':>8} {'dead-lettered':>13} {'missing':>7} {'dupl.':>5}"
)
failed = []
for _, row in runs.iterrows():
    bundle = folder / row["bundle"]
    info = json.loads((bundle / "run.json").read_text())
    queue = info["final_workload"]["deadLetterQueue"]
    enabled, copy = queue.get("enabled", True), queue.get("copyRecord", False)
    kind = "copy" if enabled and copy else ("metadata" if enabled else "off")
    fraction = info["final_workload"]["acknowledgement"].get("rejectFraction", 0.0)
    totals = info["totals"]
    dead, missing, duplicates = totals["dead_lettered"], totals["dead_letter_missing"], totals["dead_letter_duplicates"]
    consumed, p50, p99 = row["consumed_msgs_per_s"], row["e2e_p50_ms"], row["e2e_p99_ms"]
    print(
        f"{kind:<9} {fraction:>8.0%} {show(consumed, ',.0f'):>10} {show(p50, '.1f'):>8} {show(p99, '.1f'):>8}"
        f" {show(produce_p99(bundle), '.1f'):>11} {totals['rejected']:>8,} "
        f"{totals['archived']:>8,} {show(dead, ','):>13} {show(missing, ','):>7} {show(duplicates, ','):>5}"
    )
    label = f"{kind} {fraction:.0%}"
    if info["status"] != "completed":
        failed.append(f"{label}: {info['status']}")
        continue
    if not all(group["closes"] and group["lost"] == 0 for group in info["account"].values()):
        failed.append(f"{label}: the account does not close")
    expected = totals["rejected"] + totals["archived"] if kind != "off" else 0
    if (dead, missing, duplicates) != (expected, 0, 0):
        found = f"dead-lettered {dead}, missing {missing}, duplicates {duplicates}"
        failed.append(f"{label}: {found} (expected {expected})")
    if fraction and not totals["rejected"]:
        failed.append(f"{label}: nothing was rejected")

print()
if status != 0:
    failed.append(f"the campaign exited {status}")
if failed:
    print("FAILED:\n  " + "\n  ".join(failed))
    sys.exit(1)
print("every rejected record was in the dead-letter topic exactly once where there was one, and in no topic where not")
