"""Every per-client metric, declared once as a row, and the Parquet contract of a run's `metrics/`.

A row names a metric (its field in the workers' interval reports, its Parquet column, or the
`metric` value of its histogram rows), the clients that have it, its kind and unit, and where it
shows: its Prometheus series (coordinator/control/client_series.py), the `dimster status --json` fields
made from it (coordinator/control/status_schema.py), its column in the report's client tables
(report/clients.py, from the summary's per-client table) or its line in the latency panel
(report/key_numbers.py). The metrics writer (results/metrics_writer.py) and the Spark summary
(pipeline/) both read the tables' names and columns from here, and neither imports the worker.

Adding a per-client counter: its field in the wire's `ClientInterval` (worker/protocol.py), where
the client counts it (worker/), and a row in INTERVAL_METRICS (`arrow_type="float64"` for one that is
not a whole number: its Parquet column's type is declared, never inferred)."""

from dataclasses import dataclass

PRODUCING = ("producer",)
CONSUMING = ("consumer", "share_consumer")
SHARING = ("share_consumer",)
ALL_ROLES = (*PRODUCING, *CONSUMING)

# A latency of a record whose intended send time falls before the measured phase (in warm-up) goes
# under WARMUP_PREFIX + metric, on the wire and in Parquet: the measured phase's percentiles cover
# exactly the records it produced, whenever they were consumed.
WARMUP_PREFIX = "warmup_"
# A worker whose wake probe (worker/wake_lag.py) waited to run this share of the time gets a warning
# on the console and a note in the summary: an idle worker's probe waits 1-3 % (the sleep's overshoot).
WAITING_NOTED = 0.1


@dataclass(frozen=True)
class Metric:
    """One per-client metric. `source` is where it is kept: the Parquet table `intervals` (a column of
    counts per report, or a level), `histograms` (latency buckets, `metric` = name), `client_stats`
    (the client library's own statistics, metrics/client_stats.py), or `summary` (a per-client figure
    the Spark summary derives; no Parquet column of its own)."""

    name: str  # ClientInterval field, histogram metric or statistics column; also its Parquet column
    kind: str  # counter | gauge | histogram
    roles: tuple[str, ...]  # the clients that have it
    unit: str
    source: str
    prometheus: str = ""  # its per-client series (counters without `_total`); "" for none
    help: str = ""
    status: tuple[str, ...] = ()  # the `dimster status --json` fields made from it
    label: str = ""  # in the report: its client-table header, or its name in the latency panel
    client_table: str = ""  # producers | consumers: the report's client table that has a column of it
    arrow_type: str = "int64"  # source intervals: its Parquet column's type

    @property
    def column(self) -> str | None:
        """Its Parquet column (the value of `metric` for a histogram), None for a summary figure."""
        return None if self.source == "summary" else self.name


# ---- the rows ----------------------------------------------------------------------------------------
INTERVAL_METRICS: tuple[Metric, ...] = (
    Metric("target_rate", "gauge", PRODUCING, "messages/s", "intervals", status=("targetRate",),
           arrow_type="float64"),
    Metric("sent", "counter", PRODUCING, "messages", "intervals", "dimster_client_sent_messages",
           "Records handed to the producers", status=("sent", "pubRate")),
    Metric("sent_bytes", "counter", PRODUCING, "bytes", "intervals", "dimster_client_sent_bytes",
           "Record bytes handed to the producers"),
    Metric("acked", "counter", PRODUCING, "messages", "intervals", "dimster_client_acknowledged_messages",
           "Records the brokers acknowledged", status=("acked",)),
    Metric("send_errors", "counter", PRODUCING, "messages", "intervals", "dimster_client_send_errors",
           "Records the producers failed to send", status=("sendErrors",)),
    Metric("received", "counter", CONSUMING, "messages", "intervals", "dimster_client_received_messages",
           "Records the consumers received", status=("received", "consRate", "recordsPerPoll")),
    Metric("received_bytes", "counter", CONSUMING, "bytes", "intervals", "dimster_client_received_bytes",
           "Record bytes the consumers received"),
    Metric("accepted", "counter", SHARING, "messages", "intervals", "dimster_client_share_accepted_messages",
           "Records acknowledged ACCEPT"),
    Metric("released", "counter", SHARING, "messages", "intervals", "dimster_client_share_released_messages",
           "Records acknowledged RELEASE"),
    Metric("rejected", "counter", SHARING, "messages", "intervals", "dimster_client_share_rejected_messages",
           "Records acknowledged REJECT"),
    Metric("renewed", "counter", SHARING, "messages", "intervals", "dimster_client_share_lock_renewals",
           "Acquisition locks renewed (KIP-1222)", status=("lockRenewals",)),
    Metric("renewals_refused", "counter", SHARING, "messages", "intervals"),
    Metric("lock_timeouts", "counter", SHARING, "messages", "intervals", "dimster_client_share_lock_timeouts",
           "Acknowledgements refused because the record's acquisition lock had timed out",
           status=("lockTimeouts",)),
    Metric("ack_errors", "counter", SHARING, "messages", "intervals"),
    Metric("redelivered_after_crash", "counter", CONSUMING, "messages", "intervals"),
    Metric("polls", "counter", CONSUMING, "polls", "intervals", "dimster_client_polls",
           "Consumer polls (records per poll = received / polls)", status=("recordsPerPoll",)),
    # a level of the latest report: the series' largest over its clients
    Metric("max_poll_records", "gauge", CONSUMING, "messages", "intervals", "dimster_client_max_records_per_poll",
           "Most records one poll returned in the latest report", status=("maxPollRecords",)),
    Metric("max_poll_partitions", "gauge", CONSUMING, "partitions", "intervals"),
)  # fmt: skip

LATENCY_METRICS: tuple[Metric, ...] = (  # in the report's order
    Metric("e2e", "histogram", CONSUMING, "microseconds", "histograms", "dimster_e2e_latency_seconds",
           "Producer's send to the consumer's receipt, per record", status=("e2eP50Ms", "e2eP99Ms"),
           label="end to end"),
    Metric("publish", "histogram", PRODUCING, "microseconds", "histograms", "dimster_publish_latency_seconds",
           "Send to acknowledgement, per record", status=("publishP99Ms",), label="publish (send to ack)"),
    Metric("publish_delay", "histogram", PRODUCING, "microseconds", "histograms", "dimster_publish_delay_seconds",
           "Scheduled send time to the send call, per record", label="publish delay"),
    Metric("redelivery", "histogram", CONSUMING, "microseconds", "histograms",
           label="redelivery after a consumer crash"),
)  # fmt: skip

# The clients' own statistics: counters are cumulative since the client started, an average a library
# does not report is 0. Requests per kind: librdkafka counts them per kind; the Java producer counts all
# its requests (nearly all Produce) as requests_produce.
REQUEST_KINDS = ("Produce", "Fetch", "ShareFetch", "ShareAcknowledge")
STATS_METRICS: tuple[Metric, ...] = (
    Metric("ts_us", "gauge", ALL_ROLES, "microseconds", "client_stats"),
    Metric("tx_requests", "counter", ALL_ROLES, "requests", "client_stats", "dimster_client_requests",
           "Requests the Kafka clients sent"),
    Metric("tx_bytes", "counter", ALL_ROLES, "bytes", "client_stats", "dimster_client_network_sent_bytes",
           "Bytes the Kafka clients sent over the network"),
    Metric("rx_responses", "counter", ALL_ROLES, "responses", "client_stats"),
    Metric("rx_bytes", "counter", ALL_ROLES, "bytes", "client_stats", "dimster_client_network_received_bytes",
           "Bytes the Kafka clients received over the network"),
    Metric("tx_msgs", "counter", PRODUCING, "messages", "client_stats"),
    Metric("tx_msg_bytes", "counter", PRODUCING, "bytes", "client_stats"),
    Metric("rx_msgs", "counter", CONSUMING, "messages", "client_stats"),
    Metric("rx_msg_bytes", "counter", CONSUMING, "bytes", "client_stats"),
    *(Metric(f"requests_{kind.lower()}", "counter", ALL_ROLES, "requests", "client_stats") for kind in REQUEST_KINDS),
    Metric("batch_records_avg", "gauge", PRODUCING, "messages", "client_stats", "dimster_producer_batch_records_avg",
           "Records per produced batch", status=("batchRecordsAvg",), label="batch records",
           client_table="producers"),
    Metric("batch_bytes_avg", "gauge", PRODUCING, "bytes", "client_stats", "dimster_producer_batch_bytes_avg",
           "Bytes per produced batch", status=("batchBytesAvg",), label="batch bytes", client_table="producers"),
    Metric("requests", "counter", ALL_ROLES, "requests", "summary",
           help="Requests the client sent while it reported statistics (tx_requests' change)", label="requests",
           client_table="producers"),
    Metric("request_records_avg", "gauge", PRODUCING, "messages", "client_stats",
           help="Java producers: records per produce request"),
    Metric("fetch_bytes_avg", "gauge", CONSUMING, "bytes", "client_stats",
           help="Java consumers: bytes per fetch response"),
    Metric("fetch_records_avg", "gauge", CONSUMING, "messages", "client_stats", "dimster_consumer_fetch_records_avg",
           "Records per fetch response (Java clients)"),
    Metric("compression_rate_avg", "gauge", PRODUCING, "ratio", "client_stats",
           help="Java producers: compressed bytes per uncompressed byte of their batches"),
    Metric("queue_time_avg_ms", "gauge", PRODUCING, "ms", "client_stats", "dimster_producer_queue_time_seconds_avg",
           "How long a record waited in the producer before its batch left for a request", label="queue ms",
           client_table="producers"),
    Metric("request_latency_avg_ms", "gauge", ALL_ROLES, "ms", "client_stats",
           "dimster_client_request_latency_seconds_avg",
           "From a request's making to its response, as the client saw it (Java: producers only)",
           label="request ms", client_table="producers"),
    Metric("fetch_requests", "counter", CONSUMING, "requests", "summary",
           help="Fetch and ShareFetch requests while the client reported statistics", label="fetch requests",
           client_table="consumers"),
    Metric("records_per_fetch", "gauge", CONSUMING, "messages", "summary", label="records per fetch",
           client_table="consumers"),
    Metric("rx_bytes_per_consumed_byte", "gauge", CONSUMING, "ratio", "summary",
           label="bytes fetched per byte consumed", client_table="consumers"),
)  # fmt: skip

METRICS: tuple[Metric, ...] = (*INTERVAL_METRICS, *LATENCY_METRICS, *STATS_METRICS)
BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}


def from_source(source: str) -> tuple[Metric, ...]:
    return tuple(m for m in METRICS if m.source == source)


def in_client_table(table: str) -> tuple[Metric, ...]:
    """The rows with a column in the report's client table `table` (producers | consumers), in order."""
    return tuple(m for m in METRICS if m.client_table == table)


# ---- the Parquet contract: metrics/<table>/part-NNNNN.parquet ------------------------------------------
TABLES = ("intervals", "histograms", "delivery_counts", "client_stats", "brokers", "group_lag", "workers")
# consumer groups have no delivery counts; external brokers no scrape; runs without groups no lag;
# runs from before workers reported their CPU no workers
OPTIONAL_TABLES = ("delivery_counts", "brokers", "group_lag", "workers")

# Every row of intervals, histograms, delivery_counts and client_stats starts with the report's and
# the client's columns; each table's columns are declared once, with their Arrow types.
REPORT_TYPES = (("end_time", "float64"), ("run_time_s", "float64"), ("phase", "string"), ("worker", "int64"))
CLIENT_TYPES = (("client_id", "string"), ("role", "string"), ("topic", "string"), ("group", "string"))
# intervals: the client's library and generation (which Kafka client of the load client ran), then a
# column per row of INTERVAL_METRICS
INTERVAL_OWN_TYPES = (
    ("library", "string"),
    ("generation", "int64"),
    *((m.name, m.arrow_type) for m in INTERVAL_METRICS),
)
# histograms: a row per bucket of a (metric, partition) histogram, with the histogram's total, min and max
HISTOGRAM_OWN_TYPES = (
    ("metric", "string"),
    ("partition", "int64"),
    ("bucket", "int64"),
    ("count", "int64"),
    ("hist_total", "int64"),
    ("hist_min", "float64"),
    ("hist_max", "float64"),
)
DELIVERY_COUNT_OWN_TYPES = (("delivery_count", "int64"), ("count", "int64"))


def names(types: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    return tuple(column for column, _ in types)


REPORT_COLUMNS, CLIENT_COLUMNS = names(REPORT_TYPES), names(CLIENT_TYPES)
INTERVAL_COLUMNS, HISTOGRAM_COLUMNS = names(INTERVAL_OWN_TYPES), names(HISTOGRAM_OWN_TYPES)
DELIVERY_COUNT_COLUMNS = names(DELIVERY_COUNT_OWN_TYPES)
# client_stats: every column a float, whichever library reported it
STATS_COLUMNS: tuple[str, ...] = tuple(m.name for m in STATS_METRICS if m.column)

# The tables with a fixed schema, as (column, Arrow type) pairs: the clients' tables ...
INTERVAL_TYPES = (*REPORT_TYPES, *CLIENT_TYPES, *INTERVAL_OWN_TYPES)
HISTOGRAM_TYPES = (*REPORT_TYPES, *CLIENT_TYPES, *HISTOGRAM_OWN_TYPES)
DELIVERY_COUNT_TYPES = (*REPORT_TYPES, *CLIENT_TYPES, *DELIVERY_COUNT_OWN_TYPES)
# ... the brokers' samples
# (coordinator/observers/broker_scrape.py), one row per series per scrape ...
BROKER_COLUMNS = (
    ("end_time", "float64"),
    ("run_time_s", "float64"),
    ("phase", "string"),
    ("broker", "int32"),
    ("metric", "string"),
    ("labels", "map<string, string>"),
    ("value", "float64"),
)
# ... the groups' positions as the brokers see them (kafka/groups.py LagWatch): a row per partition, and a
# row of partition -1 per group with the sum and dimster's own backlog of the group at that moment ...
GROUP_LAG_COLUMNS = (
    ("end_time", "float64"),
    ("run_time_s", "float64"),
    ("phase", "string"),
    ("group", "string"),
    ("partition", "int32"),
    ("start_offset", "int64"),
    ("lag", "int64"),
    ("backlog", "int64"),
)
# ... and a row per worker report: the CPU seconds its process used since its previous report, its
# resident memory and threads at the report, how late its probe thread woke since the previous
# report (worker/wake_lag.py: its wake-ups, the sum and the largest lateness), its host's steal time
# since then and the cores it may use (diagnosis/generator.py).
WORKER_COLUMNS = (
    ("end_time", "float64"),
    ("run_time_s", "float64"),
    ("phase", "string"),
    ("worker", "int32"),
    ("cpu_seconds", "float64"),
    ("rss_bytes", "int64"),
    ("threads", "int32"),
    ("wakes", "int32"),
    ("wake_lag_ms_sum", "float64"),
    ("wake_lag_ms_max", "float64"),
    ("steal_seconds", "float64"),
    ("cores", "int32"),
)
FIXED_SCHEMAS = {
    "intervals": INTERVAL_TYPES,
    "histograms": HISTOGRAM_TYPES,
    "delivery_counts": DELIVERY_COUNT_TYPES,
    "brokers": BROKER_COLUMNS,
    "group_lag": GROUP_LAG_COLUMNS,
    "workers": WORKER_COLUMNS,
}
