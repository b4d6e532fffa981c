"""The account under pressure: account-critical share-group runs, quiet and beside a CPU hog or memory
pressure (pressure.py), each checked for an account that closes, a dead-letter topic that holds exactly
the records the account counts rejected or archived (read here, independently of dimster), and whether
the run flagged its measured phase as one with a saturated load generator.

    .venv/bin/python scripts/bench/accounts_under_pressure.py                      # 20 runs a scenario, each condition
    .venv/bin/python scripts/bench/accounts_under_pressure.py --runs 3 --conditions quiet,cpu --json-out out.json

Scenarios (explicit acknowledgement, 1 s locks, delivery count limit 2, a dead-letter queue, a share
consumer crashed live half-way): `java` and `librdkafka` reject a fifth of what they acknowledge in time,
release a tenth, and process some records past their lock; `java-renew` renews locks (KIP-1222) while
processing runs past them. A scratch cluster (Kafka 4.4) on ports clear of the shipped profiles is
started and stopped here. A warm-up of 5 s holds the Java clients' start (their JVM compiles while the
first records flow) out of the measured phase whose saturation is judged."""

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml
from common import ROOT, dimster, free_block
from pressure import start, stop

from dimster.kafka.dead_letters import HEADER
from dimster.kafka.records import every_record, partitions_of, reader

ENV = "pressure"
LOCK_MS = 1000
BASE = {
    "topics": 1, "partitionsPerTopic": 2, "messageSize": 128, "producersPerTopic": 1, "producerRate": 15,
    "consumersPerGroup": 12, "consumerProcMsMin": 0, "consumerProcMsMax": 1200, "warmupSeconds": 5,
    "durationSeconds": 0, "reportIntervalSeconds": 2, "drainTimeoutSeconds": 30, "keepTopics": True,
    "acknowledgement": {"mode": "EXPLICIT", "rejectFraction": 0.2, "releaseFraction": 0.1},
    "groupConfig": {"share.record.lock.duration.ms": LOCK_MS, "share.delivery.count.limit": 2},
    "deadLetterQueue": {},
    "kafkaConfig": {"shareConsumerConfig": {"max.poll.records": 1, "share.acquire.mode": "record_limit"}},
}  # fmt: skip
SCENARIOS = {
    "java": {"clientLibrary": {"shareConsumer": "java"}},
    "librdkafka": {"clientLibrary": {"shareConsumer": "librdkafka"}, "kafkaConfig": {}},
    "java-renew": {
        "clientLibrary": {"shareConsumer": "java"},
        "acknowledgement": {"mode": "EXPLICIT", "rejectFraction": 0.2, "renewLocks": True},
        "consumerProcMsMax": 1800,
    },
}
BROKER_CONFIG = (
    "group.share.min.record.lock.duration.ms: 1000\ngroup.share.min.heartbeat.interval.ms: 1000\n"
    "group.share.heartbeat.interval.ms: 1000\n"
)


def scratch_project() -> dict[str, str]:
    """A project whose `pressure` environment is a one-node Kafka 4.4 on free ports; its variables."""
    root = Path(tempfile.mkdtemp(prefix="dimster-pressure-"))
    shutil.copytree(ROOT / "run" / "broker-configs", root / "run" / "broker-configs")
    with (root / "run" / "broker-configs" / "default.yaml").open("a") as config:
        config.write(BROKER_CONFIG)
    base = free_block(30)
    profile = f"nodes: 1\nbrokerPortBase: {base}\ncontrollerPortBase: {base + 10}\nbrokerMetricsPortBase: {base + 20}\n"
    (root / "run" / "environments").mkdir(parents=True)
    (root / "run" / "environments" / f"{ENV}.yaml").write_text(profile)
    return {**os.environ, "DIMSTER_PROJECT_DIR": str(root), "DIMSTER_STATE_DIR": str(root / "state")}


def workload(folder: Path, scenario: str, index: int) -> Path:
    keys = {**BASE, **SCENARIOS[scenario], "name": f"{scenario}-{index}"}
    path = folder / f"{scenario}-{index}.yaml"
    path.write_text(yaml.safe_dump(keys))
    return path


def call(env: dict, *args: str) -> dict:
    result = dimster(env, *args)
    if result.returncode != 0:
        raise SystemExit(f"`dimster {' '.join(args)}` failed ({result.returncode}): {result.stderr.strip()}")
    return json.loads(result.stdout) if "--json" in args else {}


def one_run(env: dict, folder: Path, scenario: str, index: int) -> dict:
    """A detached run: a share consumer crashed once 60 records were received, stopped at 150."""
    path = workload(folder, scenario, index)
    started = call(env, "run", ENV, "-w", str(path), "--detach", "--json", "--no-summary", "--results", str(folder))
    try:
        call(env, "wait", ENV, "--until", "received>=60", "--timeout", "300", "--every", "0.5")
        call(env, "run", ENV, "--modify", "--set", "crashConsumers=1")
        call(env, "wait", ENV, "--until", "received>=150", "--timeout", "300", "--every", "0.5")
    finally:
        dimster(env, "stop", ENV)
    bundle = Path(started["results"])
    info = json.loads((bundle / "run.json").read_text())
    return judge(env, bundle, info)


def dead_letter_sources(env: dict, topic: str, bootstrap: str) -> int:
    """Distinct source records in the dead-letter topic, read here (not by dimster's own reader)."""
    consumer = reader(bootstrap, None)
    try:
        sources = Counter()
        for message in every_record(consumer, topic, partitions_of(consumer, topic)):
            headers = {k: v.decode() for k, v in message.headers() or [] if v is not None}
            sources[tuple(headers.get(HEADER + k) for k in ("group", "topic", "partition", "offset"))] += 1
        return len(sources)
    finally:
        consumer.close()


def judge(env: dict, bundle: Path, info: dict) -> dict:
    [account] = info["account"].values()
    status = json.loads(dimster(env, "cluster", "status", ENV, "--json").stdout)
    in_topic = dead_letter_sources(env, info["deadLetterQueue"]["topic"], status["bootstrap_servers"])
    events = [json.loads(line) for line in (bundle / "events.jsonl").read_text().splitlines()]
    measured = (info.get("generator") or {}).get("measure") or {}
    terms = ("acked", "accepted", "rejected", "archived", "unconsumed", "in_doubt", "lost")
    share = measured["saturated_seconds"] / measured["seconds"] if measured.get("seconds") else None
    return {
        "status": info["status"],
        "closes": account["closes"],
        "account": {k: account[k] for k in terms},
        "dead_letter_topic": in_topic,
        "dead_letter_mismatch": in_topic - (account["rejected"] + account["archived"]),
        "corrected": sum(e["event"] == "dead_letter_corrected" for e in events),
        "saturated": bool(measured.get("saturated")),
        "saturated_share": None if share is None else round(share, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per scenario and condition (default 20)")
    parser.add_argument("--conditions", default="quiet,cpu,memory")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally clauses still stop what started
    env = scratch_project()
    folder = Path(env["DIMSTER_PROJECT_DIR"]) / "results"
    folder.mkdir()
    results: list[dict] = []
    try:
        call(env, "cluster", "up", ENV)
        for condition in args.conditions.split(","):
            # each hog ends by itself within the hour should this script be killed
            hogs = [] if condition == "quiet" else start(condition, 3600, os.cpu_count() or 1, 0.5)
            load = os.getloadavg()[0]
            try:
                for scenario in args.scenarios.split(","):
                    for index in range(args.runs):
                        began = time.monotonic()
                        outcome = one_run(env, folder, scenario, index)
                        outcome.update(condition=condition, scenario=scenario, index=index, load=round(load, 1),
                                       seconds=round(time.monotonic() - began, 1))  # fmt: skip
                        results.append(outcome)
                        print(json.dumps(outcome), flush=True)
                        load = os.getloadavg()[0]
            finally:
                stop(hogs)
    finally:
        dimster(env, "cluster", "down", ENV)
        shutil.rmtree(env["DIMSTER_PROJECT_DIR"], ignore_errors=True)
    table = summarize(results)
    print("\n".join(table))
    if args.json_out:
        args.json_out.write_text(json.dumps({"runs": results, "table": table}, indent=2))
    bad = [r for r in results if not r["closes"] or r["dead_letter_mismatch"] or r["status"] != "completed"]
    return 1 if bad else 0


def summarize(results: list[dict]) -> list[str]:
    """A markdown row per condition and scenario: runs, accounts that close, dead-letter mismatches,
    records the topic corrected, phases flagged saturated."""
    head = "| condition | scenario | runs | accounts closed | dead-letter mismatches | corrected by the topic "
    lines = [head + "| in doubt | saturated phases |", "|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["condition"], r["scenario"]) for r in results}, key=lambda k: (k[0] != "quiet", k))
    for condition, scenario in keys:
        rows = [r for r in results if (r["condition"], r["scenario"]) == (condition, scenario)]
        lines.append(
            f"| {condition} | {scenario} | {len(rows)} | {sum(r['closes'] for r in rows)} "
            f"| {sum(r['dead_letter_mismatch'] != 0 for r in rows)} | {sum(r['corrected'] for r in rows)} "
            f"| {sum(r['account']['in_doubt'] for r in rows)} | {sum(r['saturated'] for r in rows)} |"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
