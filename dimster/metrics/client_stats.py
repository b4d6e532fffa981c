"""The few numbers dimster keeps from librdkafka's statistics JSON (`statistics.interval.ms`).
Counters are cumulative since the client started; the summary turns them into rates and ratios."""

from typing import Any

REQUEST_KINDS = ("Produce", "Fetch", "ShareFetch", "ShareAcknowledge")


def extract_client_stats(stats: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {
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
    requests = dict.fromkeys(REQUEST_KINDS, 0)
    for broker in stats.get("brokers", {}).values():
        for kind, count in (broker.get("req") or {}).items():
            if kind in requests:
                requests[kind] += count
    out.update({f"requests_{kind.lower()}": count for kind, count in requests.items()})
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
    return out
