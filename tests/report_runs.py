"""Synthetic run folders as `dimster run` and `dimster summarize` leave them (no Kafka, no Spark): a
share-group run whose figures and timeline come from a Scenario, for the report tests. The files hold
what a real run's do, long values included: the resolved workload with its three roles' client
libraries, run.json's per-group account, the summary's client, CPU and compression figures."""

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from dimster.pipeline.summary import SHARE_OUTCOMES

LOAD_STARTED = 1_795_000_000.0
PERCENTILE_FACTORS = {
    "p50": 1.0,
    "p75": 1.3,
    "p90": 1.7,
    "p95": 2.0,
    "p99": 3.0,
    "p99_9": 4.5,
    "p99_99": 6.0,
    "max": 7.0,
}


# ---- a synthetic run folder ----------------------------------------------------------------------------
@dataclass
class Scenario:
    """A share-group run with 3 producers and 6 consumers (560 msg/s each): by default the rate doubles at
    40 s, more than the consumers keep up with until they are doubled at 75 s; a broker is away during a
    redeploy. Every change comes from `modifications` and `events`."""

    name: str = "synthetic-share"
    rate: float = 2000.0
    modifications: list[tuple[float, str, float, float]] = field(
        default_factory=lambda: [(40.0, "producerRate", 2000, 4000), (75.0, "consumersPerGroup", 6, 12)]
    )
    events: list[tuple[float, str, dict]] = field(
        default_factory=lambda: [
            (52.0, "cluster_redeploy_started", {"message": "cluster redeploy started"}),
            (55.0, "broker_left", {"broker": 2}),
            (63.0, "broker_back", {"broker": 2}),
            (66.0, "cluster_redeploy_done", {"message": "cluster redeploy done"}),
        ]
    )
    warmup: int = 10
    stop: int = 90
    drain_end: int = 97
    dead_letters: bool = False  # the group's rejected records go to a dead-letter topic (copyRecord)

    def setting(self, key: str, initial: float, second: int) -> float:
        """The value of a workload key at `second`, after the modifications applied by then."""
        return next((new for t, k, _, new in reversed(self.modifications) if k == key and t <= second), initial)

    def broker_away(self, second: int) -> bool:
        left = [t for t, kind, _ in self.events if kind == "broker_left" and t <= second]
        back = [t for t, kind, _ in self.events if kind == "broker_back" and t <= second]
        return len(left) > len(back)

    @property
    def producers(self) -> list[str]:
        return ["p0", "p1", "p2"]

    @property
    def consumers(self) -> list[str]:
        return [f"c{i}" for i in range(int(self.setting("consumersPerGroup", 6, self.drain_end)))]


def percentiles(base_ms: float) -> dict[str, float]:
    return {name: base_ms * factor for name, factor in PERCENTILE_FACTORS.items()}


def throughput_per_second(s: Scenario) -> pd.DataFrame:
    """What the producers send at the target rate and the consumers can take, second by second."""
    rows, backlog = [], 0.0
    for second in range(s.drain_end):
        target = 0.0 if second >= s.stop else s.setting("producerRate", s.rate, second)
        sent = round(target * (1 + 0.02 * math.sin(second)))
        capacity = 560.0 * s.setting("consumersPerGroup", 6, second) * (0.45 if s.broker_away(second) else 1.0)
        received = round(min(capacity * (1 + 0.05 * math.cos(second)), backlog + sent))
        backlog += sent - received
        phase = "warmup" if second < s.warmup else "measure" if second < s.stop else "drain"
        rows.append((second, sent, sent * 500, sent, received, received * 500, received, target, phase, backlog))
    columns = ["second", "sent", "sent_bytes", "acked", "received", "received_bytes", "settled", "target_rate"]
    return pd.DataFrame(rows, columns=[*columns, "phase", "backlog"])


def latency_per_second(throughput: pd.DataFrame, s: Scenario) -> pd.DataFrame:
    """e2e grows with the time spent behind the backlog; publish jumps when a broker leaves."""
    rows = []
    for r in throughput.to_dict("records"):
        second = r["second"]
        e2e = 6.0 + 250.0 * r["backlog"] / max(r["received"], 1)
        publish = 240.0 if s.broker_away(second) and not s.broker_away(second - 3) else 4.0
        for metric, base, count in (("e2e", e2e, r["received"]), ("publish", publish, r["sent"]),
                                    ("publish_delay", 0.3, r["sent"])):  # fmt: skip
            if count:
                rows.append({"second": second, "metric": metric, "count": count, **percentiles(base)})
    return pd.DataFrame(rows)


def per_partition_and_client(s: Scenario, sent: int, received: int, e2e_p50: float) -> dict[str, pd.DataFrame]:
    topic, consumers = f"{s.name}-5f3a9c1e-0", s.consumers
    partitions = [
        {"topic": topic, "partition": p, "metric": "e2e", "count": received // 6,
         **percentiles(e2e_p50 * (0.94 + 0.02 * p))}
        for p in range(6)
    ]  # fmt: skip
    latency = [
        {"client_id": c, "role": "producer", "metric": "publish", "count": sent // 3, **percentiles(4.0 + i)}
        for i, c in enumerate(s.producers)
    ] + [
        {"client_id": c, "role": "share_consumer", "metric": "e2e", "count": received // len(consumers),
         **percentiles(e2e_p50 * (0.9 + 0.02 * i))}
        for i, c in enumerate(consumers)
    ]  # fmt: skip
    each = received // len(consumers)
    stats = [
        {"client_id": c, "role": "producer", "library": "java", "batch_records_avg": 7.5, "batch_bytes_avg": 3900.0,
         "requests": sent // 21, "compression_rate_avg": 1.0, "queue_time_avg_ms": 3.9, "request_latency_avg_ms": 1.1}
        for c in s.producers
    ] + [
        {"client_id": c, "role": "share_consumer", "library": "librdkafka", "fetch_requests": each // 45,
         "rx_bytes": each * 510,
         "requests": each // 44, "records_consumed": each, "bytes_consumed": each * 500, "records_per_fetch": 45.0,
         "rx_bytes_per_consumed_byte": 1.02, "request_latency_avg_ms": 2.4}
        for c in consumers
    ]  # fmt: skip
    return {
        "latency_per_partition": pd.DataFrame(partitions),
        "latency_per_client": pd.DataFrame(latency),
        "client_stats": pd.DataFrame(stats),
    }


def timeline(s: Scenario, throughput: pd.DataFrame, totals: dict) -> dict[str, list[dict]]:
    at = LOAD_STARTED
    events = [
        {"time": at - 0.4, "event": "topics_created", "topics": [f"{s.name}-5f3a9c1e-0"]},
        {"time": at, "event": "load_started", "warmup_seconds": s.warmup, "duration_seconds": s.stop - s.warmup},
        {"time": at + s.warmup, "event": "measure_started"},
        *({"time": at + t, "event": kind, **details} for t, kind, details in s.events),
        {"time": at + s.stop, "event": "stopping", "reason": "duration"},
        {"time": at + s.stop, "event": "drain_started", "backlog": int(throughput.backlog[s.stop - 1])},
        {"time": at + s.drain_end - 0.5, "event": "drain_ended", "drained": True, "backlog": 0},
        {"time": at + s.drain_end, "event": "run_ended", "status": "completed", **totals},
    ]
    modifications = [
        {"time": at + t, "key": key, "old": old, "new": new, "effect": "rate", "applied": at + t}
        for t, key, old, new in s.modifications
    ]
    return {"events": events, "modifications": modifications}


def resolved_workload(s: Scenario) -> dict:
    """The workload as a run resolves it (every key, defaults filled in), like a run's workload.yaml."""
    return {
        "name": s.name, "topics": 1, "partitionsPerTopic": 6, "messageSize": 500,
        "payload": {"type": "RANDOM", "compressibleRatio": 0.5}, "messageDistributor": "NO_KEY", "zipfAlpha": 1.0,
        "keyCount": 1000, "producersPerTopic": 3, "producerRate": s.rate, "consumerType": "SHARE_GROUP",
        "groupsPerTopic": 1, "consumersPerGroup": 6, "consumerProcMsMin": 0, "consumerProcMsMax": 1,
        "consumerProcParallelism": 1,
        "acknowledgement": {"mode": "EXPLICIT", "releaseFraction": 0.0, "rejectFraction": 0.0, "renewLocks": False},
        "consumersPaused": False, "staticMembership": False,
        "flowControl": {"pausedFraction": 0.0, "pattern": "random"}, "consumerCrashes": [], "faults": [],
        "warmupSeconds": s.warmup, "durationSeconds": s.stop - s.warmup, "reportIntervalSeconds": 5.0,
        "drainTimeoutSeconds": 20.0, "keepTopics": False,
        "clientLibrary": {"producer": "java", "consumer": "librdkafka", "shareConsumer": "librdkafka"},
        "clientVersion": {},
        "kafkaConfig": {"commonConfig": {}, "producerConfig": {"linger.ms": 5, "acks": "all"}, "consumerConfig": {},
                        "shareConsumerConfig": {"max.poll.records": 100}, "topicConfig": {}},
        "brokerConfig": {}, "groupConfig": {},
        "deadLetterQueue": {"copyRecord": False, "createTopic": True, "enabled": False}, "mode": {"type": "steady"},
    }  # fmt: skip


def write_run(root: Path, s: Scenario) -> Path:
    """A summarized run folder as `dimster run` and `dimster summarize` leave it."""
    run_dir = root / f"20261122T0300{len(list(root.iterdir())):02d}Z-{s.name}"
    (run_dir / "summary").mkdir(parents=True)
    throughput = throughput_per_second(s)
    latency = latency_per_second(throughput, s)
    measured = throughput[throughput.phase == "measure"]
    e2e_p50 = float(latency[(latency.metric == "e2e") & latency.second.isin(measured.second)].p50.median())
    sent, received, seconds = int(throughput.sent.sum()), int(throughput.received.sum()), len(measured)
    totals = {"sent": sent, "acked": sent, "send_errors": 0, "received": received, "accepted": received - 40,
              "released": 31, "rejected": 9, "duplicates": 0, "lost": 0, "unconsumed": 0, "in_doubt": 0,
              "backlog": 0, "renewed": 0, "renewals_refused": 0, "lock_timeouts": 0, "ack_errors": 0,
              "consumer_crashes": 0, "redelivered_after_crash": 0, "archived": 0}  # fmt: skip
    group = f"{s.name}-5f3a9c1e-t0-g0"
    account = {group: {"acked": sent, "accepted": sent - 9, "rejected": 9, "archived": 0, "unconsumed": 0,
                       "in_doubt": 0, "lost": 0, "closes": True, "unaccounted": 0}}  # fmt: skip
    workload = resolved_workload(s)
    queue = None
    if s.dead_letters:
        found = {"dead_lettered": 8, "dead_letter_missing": 1, "dead_letter_duplicates": 0}
        totals |= found
        account[group] |= found
        queue = {"topic": f"dlq.{s.name}-5f3a9c1e", "copyRecord": True, "createTopic": True, "createdBy": "dimster"}
        workload["deadLetterQueue"] = {"copyRecord": True, "createTopic": True, "enabled": True}
    run_info = {
        "run_id": run_dir.name, "workload": s.name, "environment": "localBeefy", "status": "completed",
        "started": "2026-11-22T03:00:00+00:00", "load_started": LOAD_STARTED, "ended": LOAD_STARTED + s.drain_end,
        "versions": {"dimster": "0.1.0", "kafka": "4.3.1", "confluent_kafka": "2.16.1", "librdkafka": "2.16.0",
                     "java_clients": {"producer": "4.3.1"}, "java": 'openjdk version "17.0.15" 2025-04-15',
                     "jpype": "1.7.1", "python": "3.11.7"},
        "hardware": {"cpus": 8, "cpu_model": "Example CPU @ 3.0GHz", "memory_bytes": 32 * 2**30,
                     "platform": "Linux-6.1-x86_64-with-glibc2.36", "hostname": "bench"},
        "totals": totals, "account": account, "deadLetterQueue": queue, "final_workload": workload,
        "topics": [f"{s.name}-5f3a9c1e-0"], "groups": {group: f"{s.name}-5f3a9c1e-0"},
        "command_line": ["dimster", "run", "localBeefy", "-w", "w.yaml"],
    }  # fmt: skip
    summary = {
        "run": run_dir.name, "status": "completed", "totals": totals, "notes": [],
        "timeline": timeline(s, throughput, totals), "account": account, "dead_letter_queue": queue,
        "throughput": {"seconds": seconds, "produced_msgs_per_s": measured.sent.sum() / seconds,
                       "produced_mb_per_s": measured.sent_bytes.sum() / seconds / 1e6,
                       "consumed_msgs_per_s": measured.received.sum() / seconds,
                       "consumed_mb_per_s": measured.received_bytes.sum() / seconds / 1e6},
        "polls": {"polls": received // 40, "records_per_poll": 40.0, "max_records_in_a_poll": 100},
        "latency_ms": {"e2e": {"count": received, **percentiles(e2e_p50)},
                       "publish": {"count": sent, **percentiles(4.5)},
                       "publish_delay": {"count": sent, **percentiles(0.3)}},
        "delivery_counts": {"1": received - 120, "2": 112, "3": 8},
        "client_stats": {"producer_batch_records_avg": 7.5, "producer_batch_bytes_avg": 3900.0,
                         "producer_compression_rate_avg": 1.0, "producer_queue_time_ms_avg": 3.9,
                         "producer_request_latency_ms_avg": 1.1, "consumer_request_latency_ms_avg": 2.4,
                         "consumer_fetch_requests": received // 45, "records_per_fetch": 45.0,
                         "rx_bytes_per_consumed_byte": 1.02},
        "worker_cpu": {"cores": 0.21, "wake_wait_share": 0.056, "memory_mb": 183.0, "threads": 41.0,
                       "producer_cpu_seconds_per_mb": 0.018, "consumer_cpu_seconds_per_mb": 0.027},
        "compression": {"payload_bytes": sent * 500, "broker_bytes_in": round(sent * 500 / 0.95), "ratio": 0.95,
                        "producer_compression_rate_avg": 1.0},
        "share_outcomes": {k: totals.get(k) for k in SHARE_OUTCOMES},
    }  # fmt: skip
    tables = {
        "throughput_per_second": throughput,
        "latency_per_second": latency,
        "delivery_counts": pd.DataFrame({"delivery_count": [1, 2, 3], "records": [received - 120, 112, 8]}),
        **per_partition_and_client(s, sent, received, e2e_p50),
    }
    for name, table in tables.items():
        table.to_csv(run_dir / "summary" / f"{name}.csv", index=False)
    (run_dir / "summary" / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    (run_dir / "run.json").write_text(json.dumps(run_info, indent=2))
    environment = {"name": "localBeefy", "backend": "local", "nodes": 3, "kafkaVersion": "4.3.1", "workers": 2}
    for name, content in (("workload.yaml", workload), ("environment.yaml", environment),
                          ("broker-config.yaml", {"num.partitions": "1", "log.retention.hours": "1"})):  # fmt: skip
        (run_dir / name).write_text(yaml.safe_dump(content, sort_keys=False))
    for name, records in summary["timeline"].items():
        (run_dir / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run_dir


# ---- a synthetic campaign folder -----------------------------------------------------------------------
CAMPAIGN_DIMENSIONS = [  # the dead-letter campaign's: two keys varied together, then one
    {"keys": ["deadLetterQueue.enabled", "deadLetterQueue.copyRecord"], "values": [[False, False], [True, False],
                                                                                   [True, True]]},
    {"keys": ["acknowledgement.rejectFraction"], "values": [[0.0], [0.01], [0.1]]},
]  # fmt: skip


def point_means(point: int, reject: float, dead_letters: bool) -> dict[str, float]:
    """A point's figures as campaign/summary/points.parquet holds them (one repeat: min = mean = max)."""
    sent = 35_000 + 2 * point
    figures = {
        "measured_seconds": 30.0, "produced_msgs_per_s": 1000.0, "produced_mb_per_s": 0.512,
        "consumed_msgs_per_s": 1000.0 - point, "consumed_mb_per_s": 0.512, "e2e_p50_ms": 4.0 + point,
        "e2e_p99_ms": 10.0 + 8 * point, "e2e_p99_9_ms": 27.0 + 15 * point, "publish_p99_ms": 8.5 + point,
        "compression_ratio": 0.95, "worker_cores": 0.18 + 0.01 * point, "worker_memory_mb": 180.0 + point,
        "worker_threads": 41.0, "worker_wake_wait_share": 0.01 * point, "worker_producer_cpu_seconds_per_mb": None,
        "worker_consumer_cpu_seconds_per_mb": None, "records_per_fetch": 3.0 + 0.1 * point,
        "rx_bytes_per_consumed_byte": 1.11, "producer_queue_time_ms": 3.3 + 0.1 * point,
        "producer_request_latency_ms": 0.36 * point, "sent": sent, "acked": sent, "received": sent, "lost": 0,
        "unconsumed": 0, "duplicates": 0, "dead_lettered": round(sent * reject) if dead_letters else 0,
        "dead_letter_missing": 0, "dead_letter_duplicates": 0,
    }  # fmt: skip
    columns = {}
    for metric, value in figures.items():
        columns |= {f"{metric}_mean": value, f"{metric}_min": value, f"{metric}_max": value, f"{metric}_stddev": None}
    return columns


def write_campaign(root: Path, name: str = "dead-letter") -> Path:
    """A summarized campaign folder as `dimster campaign` and its summary leave it: 9 points (one repeat
    each) over the dead-letter campaign's dimensions, whose keys make long labels."""
    folder = root / f"20261127T133235Z-{name}"
    (folder / "campaign" / "summary").mkdir(parents=True)
    points, rows = [], []
    for index, (queue, (reject,)) in enumerate(
        ((q, r) for q in CAMPAIGN_DIMENSIONS[0]["values"] for r in CAMPAIGN_DIMENSIONS[1]["values"]), start=1
    ):
        values = {"deadLetterQueue.enabled": queue[0], "deadLetterQueue.copyRecord": queue[1],
                  "acknowledgement.rejectFraction": reject}  # fmt: skip
        label = ", ".join(f"{key}={value}" for key, value in values.items())
        points.append({"index": index, "repeat": 1, "values": values, "label": label, "status": "completed",
                       "bundle": f"20261127T1333{index:02d}Z-{name}-p{index}", "exit_code": 0, "failure": None,
                       "mode": {"type": "steady"}})  # fmt: skip
        rows.append({"point": index, "label": label, **values, "status": "completed",
                     **point_means(index, reject, queue[0]), "repeats": 1})  # fmt: skip
    campaign = {
        "name": name, "campaign_file": f"run/campaigns/{name}.yaml", "fingerprint": "88bc8e5ca6d7b1ba",
        "environment": "local", "workers": None, "created": LOAD_STARTED, "ended": LOAD_STARTED + 442,
        "mode": {"type": "steady"}, "dimensions": CAMPAIGN_DIMENSIONS, "repeat": 1, "points": points,
    }  # fmt: skip
    (folder / "campaign.json").write_text(json.dumps(campaign, indent=2))
    summary = folder / "campaign" / "summary"
    pd.DataFrame(rows).to_parquet(summary / "points.parquet", index=False)
    (summary / "summary.json").write_text(json.dumps({"campaign": name, "notes": [], "points": rows}, default=str))
    return folder
