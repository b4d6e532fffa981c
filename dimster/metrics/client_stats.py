"""The few numbers dimster keeps of a Kafka client's own statistics, the same columns whichever
library the client runs: each library's module under dimster/clients/ fills them from its own
statistics (librdkafka's `statistics.interval.ms` JSON, the Java clients' `metrics()`). Counters
are cumulative since the client started; the summary turns them into rates and ratios. An average
a library does not report is 0."""

REQUEST_KINDS = ("Produce", "Fetch", "ShareFetch", "ShareAcknowledge")
COLUMNS = (
    "ts_us",
    "tx_requests",
    "tx_bytes",
    "rx_responses",
    "rx_bytes",
    "tx_msgs",
    "tx_msg_bytes",
    "rx_msgs",
    "rx_msg_bytes",
    *(f"requests_{kind.lower()}" for kind in REQUEST_KINDS),
    "batch_bytes_avg",  # producers: bytes per record batch
    "batch_records_avg",  # producers: records per record batch
    "request_records_avg",  # Java producers: records per produce request
    "fetch_bytes_avg",  # Java consumers: bytes per fetch response
    "fetch_records_avg",  # Java consumers: records per fetch response
    "compression_rate_avg",  # Java producers: compressed bytes per uncompressed byte of their batches
    "queue_time_avg_ms",  # producers: how long a record waited in the client before its batch left for a request
    "request_latency_avg_ms",  # from a request's making to its response (Java: producers only)
)
