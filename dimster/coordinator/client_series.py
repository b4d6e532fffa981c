"""The run's Prometheus series per kind of client: counters, latency histograms and the clients' own
statistics summed per (worker, role, topic, group, client library), fed from the workers' interval
reports. Prometheus takes rates and quantiles of these; the run-wide status gauges stay in
status_schema.py."""

import math
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from dimster.clients import STATS_INTERVAL_S
from dimster.metrics.histogram import GAMMA, bucket_value
from dimster.worker.protocol import WARMUP_PREFIX, IntervalReport

SERIES_LABELS = ("worker", "role", "topic", "group", "client_library")


def _bucket_index(seconds: float) -> int:
    """The dimster histogram bucket (microseconds) whose upper edge is nearest `seconds`."""
    return round(math.log(seconds * 1e6) / math.log(GAMMA))


# Prometheus bucket bounds on edges of dimster's own buckets, near a 1-2-5 ladder from 100 us to
# 60 s: every dimster bucket falls wholly below or above each bound, so the cumulative counts are exact.
LADDER_SECONDS = (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60)
BOUNDS: tuple[int, ...] = tuple(_bucket_index(seconds) for seconds in LADDER_SECONDS)

LATENCIES = {  # dimster histogram -> (Prometheus name, help)
    "publish": ("dimster_publish_latency_seconds", "Send to acknowledgement, per record"),
    "publish_delay": ("dimster_publish_delay_seconds", "Scheduled send time to the send call, per record"),
    "e2e": ("dimster_e2e_latency_seconds", "Producer's send to the consumer's receipt, per record"),
}

PRODUCING = ("producer",)
CONSUMING = ("consumer", "share_consumer")
COUNTERS = {  # ClientInterval field -> (Prometheus name without _total, help, the roles that count it)
    "sent": ("dimster_client_sent_messages", "Records handed to the producers", PRODUCING),
    "sent_bytes": ("dimster_client_sent_bytes", "Record bytes handed to the producers", PRODUCING),
    "acked": ("dimster_client_acknowledged_messages", "Records the brokers acknowledged", PRODUCING),
    "send_errors": ("dimster_client_send_errors", "Records the producers failed to send", PRODUCING),
    "received": ("dimster_client_received_messages", "Records the consumers received", CONSUMING),
    "received_bytes": ("dimster_client_received_bytes", "Record bytes the consumers received", CONSUMING),
    "polls": ("dimster_client_polls", "Consumer polls (records per poll = received / polls)", CONSUMING),
    "accepted": ("dimster_client_share_accepted_messages", "Records acknowledged ACCEPT", ("share_consumer",)),
    "released": ("dimster_client_share_released_messages", "Records acknowledged RELEASE", ("share_consumer",)),
    "rejected": ("dimster_client_share_rejected_messages", "Records acknowledged REJECT", ("share_consumer",)),
    "renewed": ("dimster_client_share_lock_renewals", "Acquisition locks renewed (KIP-1222)", ("share_consumer",)),
    "lock_timeouts": (
        "dimster_client_share_lock_timeouts",
        "Acknowledgements refused because the record's acquisition lock had timed out",
        ("share_consumer",),
    ),
}

# The clients' own statistics (metrics/client_stats.py): cumulative counters summed over clients (a
# client rebuilt by a live change starts again from 0: what it had counted stays in the series) ...
STATS_COUNTERS = {
    "tx_requests": ("dimster_client_requests", "Requests the Kafka clients sent"),
    "tx_bytes": ("dimster_client_network_sent_bytes", "Bytes the Kafka clients sent over the network"),
    "rx_bytes": ("dimster_client_network_received_bytes", "Bytes the Kafka clients received over the network"),
}
# ... and averages, averaged over the clients that report them (columns in ms go out in seconds, as
# Prometheus has times).
STATS_GAUGES = {
    "batch_records_avg": ("dimster_producer_batch_records_avg", "Records per produced batch"),
    "batch_bytes_avg": ("dimster_producer_batch_bytes_avg", "Bytes per produced batch"),
    "fetch_records_avg": ("dimster_consumer_fetch_records_avg", "Records per fetch response (Java clients)"),
    "queue_time_avg_ms": (
        "dimster_producer_queue_time_seconds_avg",
        "How long a record waited in the producer before its batch left for a request",
    ),
    "request_latency_avg_ms": (
        "dimster_client_request_latency_seconds_avg",
        "From a request's making to its response, as the client saw it (Java: producers only)",
    ),
}


@dataclass
class Series:
    counts: Counter = field(default_factory=Counter)  # ClientInterval field -> total
    latencies: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))  # metric -> bucket counts
    max_poll_records: int = 0  # in the latest report
    stats: dict[str, tuple[float, dict]] = field(default_factory=dict)  # client id -> (report end, its latest)
    retired: Counter = field(default_factory=Counter)  # statistics column -> counts of clients' earlier runs

    def new_stats(self, client_id: str, at: float, stats: dict) -> None:
        _, previous = self.stats.get(client_id, (0.0, {}))
        for column in STATS_COUNTERS:
            if stats.get(column, 0.0) < previous.get(column, 0.0):  # the client was rebuilt: counts restarted
                self.retired[column] += previous[column]
        self.stats[client_id] = (at, stats)

    def stats_total(self, column: str) -> float:
        return self.retired[column] + sum(s.get(column, 0.0) for _, s in self.stats.values())


class ClientSeries:
    def __init__(self, run_labels: dict[str, str] | None = None):
        """`run_labels` (environment, run, ...) go on every series, before the client's own."""
        self.names = (*(run_labels or {}), *SERIES_LABELS)
        self.prefix = tuple((run_labels or {}).values())
        self.series: dict[tuple[str, ...], Series] = defaultdict(Series)
        self.lock = threading.Lock()  # add() runs in the run loop, collect() in the HTTP thread

    def add(self, report: IntervalReport) -> None:
        most: dict[tuple[str, ...], int] = {}  # per series, the most records one poll returned in this report
        with self.lock:
            for c in report.clients:
                key = (str(report.worker_index), c.role, c.topic, c.group, c.library)
                series = self.series[key]
                series.counts.update({name: getattr(c, name) for name in COUNTERS})
                if c.role != "producer":
                    most[key] = max(most.get(key, 0), c.max_poll_records)
                for (metric, _partition), (counts, *_rest) in c.histograms.items():
                    name = metric.removeprefix(WARMUP_PREFIX)  # live series include the warm-up
                    if name in LATENCIES:
                        series.latencies[name].update(counts)
                if c.client_stats:
                    series.new_stats(c.client_id, report.end_time, c.client_stats)
            for key, value in most.items():
                self.series[key].max_poll_records = value

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        with self.lock:
            series = {
                key: (
                    s.counts.copy(),
                    {m: c.copy() for m, c in s.latencies.items()},
                    s.max_poll_records,
                    list(s.stats.values()),
                    {column: s.stats_total(column) for column in STATS_COUNTERS} if s.stats else None,
                )
                for key, s in self.series.items()
            }
        for field_name, (name, help_text, roles) in COUNTERS.items():
            family = CounterMetricFamily(name, help_text, labels=self.names)
            for key, (counts, *_) in series.items():
                if key[1] in roles:
                    family.add_metric((*self.prefix, *key), counts[field_name])
            yield family
        for metric, (name, help_text) in LATENCIES.items():
            family = HistogramMetricFamily(name, help_text, labels=self.names)
            for key, (_, latencies, *_) in series.items():
                if metric in latencies:
                    family.add_metric((*self.prefix, *key), *prometheus_buckets(latencies[metric]))
            yield family
        polls = GaugeMetricFamily(
            "dimster_client_max_records_per_poll",
            "Most records one poll returned in the latest report",
            labels=self.names,
        )
        for key, (_, _, most, *_) in series.items():
            if key[1] != "producer":
                polls.add_metric((*self.prefix, *key), most)
        yield polls
        for column, (name, help_text) in STATS_COUNTERS.items():
            family = CounterMetricFamily(name, help_text, labels=self.names)
            for key, (*_, totals) in series.items():
                if totals:
                    family.add_metric((*self.prefix, *key), totals[column])
            yield family
        for column, (name, help_text) in STATS_GAUGES.items():
            family = GaugeMetricFamily(name, help_text, labels=self.names)
            scale = 1e-3 if column.endswith("_ms") else 1.0
            for key, (*_, stats, _) in series.items():
                newest = max((at for at, _ in stats), default=0.0)
                # averages of clients gone for two statistics intervals (removed, rebuilt) drop out
                values = [s[column] for at, s in stats if s.get(column) and at >= newest - 2 * STATS_INTERVAL_S]
                if values:
                    family.add_metric((*self.prefix, *key), sum(values) / len(values) * scale)
            yield family


def prometheus_buckets(counts: Counter) -> tuple[list[tuple[str, float]], float]:
    """Cumulative (le, count) pairs in seconds, +Inf last, and the sum of the values in seconds (each
    bucket's count at its representative value: within 1 % like the histogram itself)."""
    ordered = sorted(counts.items())
    buckets, seen, position = [], 0, 0
    for bound in BOUNDS:
        while position < len(ordered) and ordered[position][0] <= bound:
            seen += ordered[position][1]
            position += 1
        buckets.append((f"{GAMMA**bound / 1e6:.6g}", seen))
    buckets.append(("+Inf", sum(counts.values())))
    total_us = sum(bucket_value(index) * count for index, count in ordered)
    return buckets, total_us / 1e6
