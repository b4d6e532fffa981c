"""The few numbers dimster keeps of a Kafka client's own statistics, the same columns whichever
library the client runs: librdkafka's statistics JSON (`statistics.interval.ms`) or the Java
clients' `metrics()`. Counters are cumulative since the client started; the summary turns them into
rates and ratios. An average a library does not report is 0."""

from typing import Any

from dimster.metrics.schema import REQUEST_KINDS, STATS_COLUMNS

COLUMNS = STATS_COLUMNS  # the client_stats table's columns, one row each in metrics/schema.py


def extract_client_stats(stats: dict[str, Any]) -> dict[str, float]:
    """From librdkafka's statistics JSON."""
    out: dict[str, float] = dict.fromkeys(COLUMNS, 0.0)
    out.update(
        {
            "ts_us": stats.get("time", 0) * 1_000_000,
            "tx_requests": stats.get("tx", 0),
            "tx_bytes": stats.get("tx_bytes", 0),
            "rx_responses": stats.get("rx", 0),
            "rx_bytes": stats.get("rx_bytes", 0),
            "tx_msgs": stats.get("txmsgs", 0),
            "tx_msg_bytes": stats.get("txmsg_bytes", 0),
            "rx_msgs": stats.get("rxmsgs", 0),
            "rx_msg_bytes": stats.get("rxmsg_bytes", 0),
        }
    )
    requests = dict.fromkeys(REQUEST_KINDS, 0)
    brokers = list(stats.get("brokers", {}).values())
    for broker in brokers:
        for kind, count in (broker.get("req") or {}).items():
            if kind in requests:
                requests[kind] += count
    out.update({f"requests_{kind.lower()}": count for kind, count in requests.items()})
    # the window averages (microseconds) of the brokers' connections, weighted by what each counted:
    # int_latency is a produced record's wait in the client's queue; a request then waits in the
    # connection's output buffer (outbuf_latency) and for its response (rtt), which Java's
    # request-latency-avg counts together
    out["queue_time_avg_ms"] = _weighted_avg_ms(brokers, "int_latency")
    out["request_latency_avg_ms"] = _weighted_avg_ms(brokers, "outbuf_latency") + _weighted_avg_ms(brokers, "rtt")
    # Producer batches: weighted over topics by how many batches each saw in the window.
    batches = size_sum = count_sum = 0.0
    for topic in stats.get("topics", {}).values():
        size, count = topic.get("batchsize") or {}, topic.get("batchcnt") or {}
        n = size.get("cnt", 0)
        batches += n
        size_sum += size.get("avg", 0) * n
        count_sum += count.get("avg", 0) * n
    out["batch_bytes_avg"] = size_sum / batches if batches else 0.0
    out["batch_records_avg"] = count_sum / batches if batches else 0.0
    return {column: float(value) for column, value in out.items()}  # one Parquet type for both libraries


def _weighted_avg_ms(brokers: list[dict], window: str) -> float:
    """The average of librdkafka's `window` statistic over all broker connections, in ms (0: none counted)."""
    windows = [b.get(window) or {} for b in brokers]
    count = sum(w.get("cnt", 0) for w in windows)
    return sum(w.get("avg", 0) * w.get("cnt", 0) for w in windows) / count / 1000 if count else 0.0


def _network(group: str) -> dict[str, str]:
    return {
        "tx_requests": f"{group}:request-total",
        "tx_bytes": f"{group}:outgoing-byte-total",
        "rx_responses": f"{group}:response-total",
        "rx_bytes": f"{group}:incoming-byte-total",
    }


def _fetches(group: str, requests_column: str) -> dict[str, str]:
    return {
        "rx_msgs": f"{group}:records-consumed-total",
        "rx_msg_bytes": f"{group}:bytes-consumed-total",
        requests_column: f"{group}:fetch-total",
        "fetch_bytes_avg": f"{group}:fetch-size-avg",
        "fetch_records_avg": f"{group}:records-per-request-avg",
    }


# Column -> "metric group:metric name" of the Java clients, per role. Names starting with "_" feed
# a derived column. The Java producer has no per-request-type counts: its requests_produce counts
# all its requests (nearly all are Produce).
JAVA_METRICS: dict[str, dict[str, str]] = {
    "producer": {
        **_network("producer-metrics"),
        "tx_msgs": "producer-metrics:record-send-total",
        "tx_msg_bytes": "producer-topic-metrics:byte-total",
        "requests_produce": "producer-metrics:request-total",
        "batch_bytes_avg": "producer-metrics:batch-size-avg",
        "request_records_avg": "producer-metrics:records-per-request-avg",
        "compression_rate_avg": "producer-metrics:compression-rate-avg",
        "queue_time_avg_ms": "producer-metrics:record-queue-time-avg",
        "request_latency_avg_ms": "producer-metrics:request-latency-avg",
        "_topic_record_rate": "producer-topic-metrics:record-send-rate",
        "_topic_byte_rate": "producer-topic-metrics:byte-rate",
    },
    "consumer": {**_network("consumer-metrics"), **_fetches("consumer-fetch-manager-metrics", "requests_fetch")},
    "share_consumer": {
        **_network("consumer-metrics"),
        **_fetches("consumer-share-fetch-manager-metrics", "requests_sharefetch"),
    },
}


def java_client_stats(role: str, values: dict[str, float], now: float) -> dict[str, float]:
    """From the Java metrics of `role` (JAVA_METRICS' columns to their values), at epoch `now`."""
    out: dict[str, float] = dict.fromkeys(COLUMNS, 0.0)
    out.update({column: float(value) for column, value in values.items() if not column.startswith("_")})
    out["ts_us"] = now * 1_000_000
    if role == "producer" and values.get("_topic_byte_rate"):
        # Every batch adds its size to both batch-size-avg and the topics' byte-rate, so over the same
        # window records per batch = bytes per batch * records per second / bytes per second.
        out["batch_records_avg"] = out["batch_bytes_avg"] * values["_topic_record_rate"] / values["_topic_byte_rate"]
    return out
