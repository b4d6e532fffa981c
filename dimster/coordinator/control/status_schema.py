"""The run's numeric status fields, named once: what `dimster status --json` answers, what `dimster
wait --until` conditions may name, and what the run's Prometheus endpoint exports (Prometheus names
with their units, `_total` for counters)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class StatusField:
    name: str  # in status --json and wait conditions
    metric: str  # the Prometheus name
    kind: str  # gauge | counter
    help: str
    scale: float = 1.0  # status value x scale = exported value (ms -> s)


FIELDS: tuple[StatusField, ...] = (
    StatusField(
        "pubRate",
        "dimster_published_messages_per_second",
        "gauge",
        "Records handed to the producers, per second, over the last 5 s (since a live change, in the 3 s after it)",
    ),
    StatusField(
        "consRate",
        "dimster_consumed_messages_per_second",
        "gauge",
        "Records received by the consumers, per second, over the last 5 s (since a live change, in the 3 s after it)",
    ),
    StatusField("targetRate", "dimster_target_messages_per_second", "gauge", "The producers' target rate"),
    StatusField(
        "rateSeconds",
        "dimster_rate_window_seconds",
        "gauge",
        "The seconds pubRate and consRate cover: up to 5, less just after load starts or a live change",
    ),
    StatusField("sent", "dimster_sent_messages_total", "counter", "Records handed to the producers"),
    StatusField("acked", "dimster_acknowledged_messages_total", "counter", "Records the brokers acknowledged"),
    StatusField("received", "dimster_received_messages_total", "counter", "Records the consumers received"),
    StatusField(
        "backlog", "dimster_backlog_messages", "gauge", "Acknowledged records not yet settled, summed over groups"
    ),
    StatusField(
        "brokerLag",
        "dimster_broker_lag_messages",
        "gauge",
        "Records the groups have yet to consume as the brokers count them (share groups: KIP-1226 lag), every 5 s",
    ),
    StatusField(
        "brokerLagAtSeconds",
        "dimster_broker_lag_read_at_seconds",
        "gauge",
        "When brokerLag was read, in seconds since load started",
    ),
    StatusField("duplicates", "dimster_duplicate_messages_total", "counter", "Records settled more than once"),
    StatusField("sendErrors", "dimster_send_errors_total", "counter", "Records the producers failed to send"),
    StatusField(
        "lockRenewals", "dimster_lock_renewals_total", "counter", "Acquisition locks the share consumers renewed"
    ),
    StatusField(
        "lockTimeouts",
        "dimster_lock_timeouts_total",
        "counter",
        "Share acknowledgements refused because the record's acquisition lock had timed out",
    ),
    StatusField(
        "lost",
        "dimster_lost_messages",
        "gauge",
        "Acknowledged records no group can consume any more (known at the end)",
    ),
    StatusField(
        "unconsumed", "dimster_unconsumed_messages", "gauge", "Records still within the groups' reach at the end"
    ),
    # dead-letter queues (KIP-1191): None when the run has none; the names are issue 35's, in every output
    StatusField(
        "dead_lettered",
        "dimster_dead_lettered_messages",
        "gauge",  # not a counter: at the end it becomes the run's records found there, each once
        "Records in the run's dead-letter topic: its record count while load runs, at the end the run's "
        "records found there, each once",
    ),
    StatusField(
        "dead_letter_missing",
        "dimster_dead_letter_missing_messages",
        "gauge",
        "Rejected or archived-on-last-delivery records not found in the dead-letter topic (known at the end)",
    ),
    StatusField(
        "dead_letter_duplicates",
        "dimster_dead_letter_duplicate_messages",
        "gauge",
        "Extra copies of the run's records in the dead-letter topic (known at the end)",
    ),
    StatusField(
        "e2eP50Ms",
        "dimster_e2e_latency_p50_seconds",
        "gauge",
        "End-to-end latency p50 over the last status line's window",
        1e-3,
    ),
    StatusField(
        "e2eP99Ms",
        "dimster_e2e_latency_p99_seconds",
        "gauge",
        "End-to-end latency p99 over the last status line's window",
        1e-3,
    ),
    StatusField(
        "publishP99Ms",
        "dimster_publish_latency_p99_seconds",
        "gauge",
        "Send-to-acknowledgement latency p99 over the last status line's window",
        1e-3,
    ),
    StatusField("elapsedSeconds", "dimster_load_elapsed_seconds", "gauge", "Seconds since load started"),
    StatusField("producers", "dimster_producers", "gauge", "Producer clients"),
    StatusField("consumers", "dimster_consumers", "gauge", "Consumer clients"),
    StatusField(
        "batchRecordsAvg",
        "dimster_producer_batch_records",
        "gauge",
        "Records per produced batch, averaged over producers",
    ),
    StatusField(
        "batchBytesAvg", "dimster_producer_batch_bytes", "gauge", "Bytes per produced batch, averaged over producers"
    ),
    StatusField(
        "recordsPerPoll",
        "dimster_records_per_poll",
        "gauge",
        "Records per consumer poll over the last status line's window",
    ),
    StatusField(
        "maxPollRecords",
        "dimster_max_records_per_poll",
        "gauge",
        "Most records one poll returned in the last status line's window",
    ),
    StatusField(
        "workerWaitShare",
        "dimster_worker_wait_ratio",
        "gauge",
        "The largest share of the last status line's window a worker's threads waited to run (for a core or "
        "the GIL); from 0.1 up the clients' figures include that wait",
    ),
    StatusField(
        "generatorSaturated",
        "dimster_generator_saturated_workers",
        "gauge",
        "Workers that could not keep their clients' schedule over the last status line's window: threads "
        "waiting to run, CPU at their cores, or steal time (`generator` says why)",
    ),
    StatusField(
        "limitRate",
        "dimster_limit_rate",
        "gauge",
        "The consumption rate (msg/s, per group) the binding limit allows, while a share group falls behind and "
        "one explains it (see `limit`); absent otherwise",
    ),
)

NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)
