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
from dimster.metrics.schema import INTERVAL_METRICS, LATENCY_METRICS, STATS_METRICS, WARMUP_PREFIX
from dimster.worker.client_columns import COUNT_INDEX
from dimster.worker.protocol import IntervalReport

SERIES_LABELS = ("worker", "role", "topic", "group", "client_library")


def _bucket_index(seconds: float) -> int:
    """The dimster histogram bucket (microseconds) whose upper edge is nearest `seconds`."""
    return round(math.log(seconds * 1e6) / math.log(GAMMA))


# Prometheus bucket bounds on edges of dimster's own buckets, near a 1-2-5 ladder from 100 us to
# 60 s: every dimster bucket falls wholly below or above each bound, so the cumulative counts are exact.
LADDER_SECONDS = (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60)
BOUNDS: tuple[int, ...] = tuple(_bucket_index(seconds) for seconds in LADDER_SECONDS)

# The series, from the rows of metrics/schema.py that name one:
# histogram metric -> (Prometheus name, help)
LATENCIES = {m.name: (m.prometheus, m.help) for m in LATENCY_METRICS if m.prometheus}
# ClientInterval counter -> (Prometheus name without _total, help, the roles that count it)
COUNTERS = {m.name: (m.prometheus, m.help, m.roles) for m in INTERVAL_METRICS if m.prometheus and m.kind == "counter"}
# ClientInterval level -> (Prometheus name, help, roles): the series' largest of its clients' in the latest report
GAUGES = {m.name: (m.prometheus, m.help, m.roles) for m in INTERVAL_METRICS if m.prometheus and m.kind == "gauge"}
# The clients' own statistics (metrics/client_stats.py): cumulative counters summed over clients (a
# client rebuilt by a live change starts again from 0: what it had counted stays in the series) ...
COUNTER_COLUMNS = [COUNT_INDEX[name] for name in COUNTERS]  # of a report's counters (client_columns.py)
GAUGE_COLUMNS = [COUNT_INDEX[name] for name in GAUGES]
STATS_COUNTERS = {m.name: (m.prometheus, m.help) for m in STATS_METRICS if m.prometheus and m.kind == "counter"}
# ... and averages, averaged over the clients that report them (columns in ms go out in seconds, as
# Prometheus has times).
STATS_GAUGES = {m.name: (m.prometheus, m.help) for m in STATS_METRICS if m.prometheus and m.kind == "gauge"}


@dataclass
class Series:
    counts: Counter = field(default_factory=Counter)  # ClientInterval field -> total
    latencies: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))  # metric -> bucket counts
    levels: dict[str, int] = field(default_factory=dict)  # GAUGES field -> the largest in the latest report
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
        latest: dict[tuple[str, ...], dict[str, int]] = {}  # per series, GAUGES' largest in this report
        clients, workers = report.clients, [str(line.worker_index) for line in report.lines]
        lines = report.client_line.tolist()
        names = zip(lines, clients.role, clients.topic, clients.group, clients.library, strict=True)
        keys: list[tuple[str, ...]] = [(workers[line], *client) for line, *client in names]
        table = clients.tables[0]
        counters, gauges = table[:, COUNTER_COLUMNS].tolist(), table[:, GAUGE_COLUMNS].tolist()
        with self.lock:
            for client, metric, _partition, (counts, *_rest) in report.histograms.wires():
                name = metric.removeprefix(WARMUP_PREFIX)  # live series include the warm-up
                if name in LATENCIES:
                    self.series[keys[client]].latencies[name].update(counts)
            for key, counted, levels_now in zip(keys, counters, gauges, strict=True):
                series = self.series[key]
                series.counts.update(dict(zip(COUNTERS, counted, strict=True)))
                for (name, (*_, roles)), level in zip(GAUGES.items(), levels_now, strict=True):
                    if key[1] in roles:
                        levels = latest.setdefault(key, {})
                        levels[name] = max(levels.get(name, 0), level)
            for i, details in clients.details.items():
                if details.client_stats:
                    end = report.lines[lines[i]].end_time
                    self.series[keys[i]].new_stats(clients.client_id[i], end, details.client_stats)
            for key, levels in latest.items():
                self.series[key].levels.update(levels)

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        with self.lock:
            series = {
                key: (
                    s.counts.copy(),
                    {m: c.copy() for m, c in s.latencies.items()},
                    dict(s.levels),
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
            histogram = HistogramMetricFamily(name, help_text, labels=self.names)
            for key, (_, latencies, *_) in series.items():
                if metric in latencies:
                    histogram.add_metric((*self.prefix, *key), *prometheus_buckets(latencies[metric]))
            yield histogram
        for field_name, (name, help_text, roles) in GAUGES.items():
            gauge = GaugeMetricFamily(name, help_text, labels=self.names)
            for key, (_, _, levels, *_) in series.items():
                if key[1] in roles:
                    gauge.add_metric((*self.prefix, *key), levels.get(field_name, 0))
            yield gauge
        for column, (name, help_text) in STATS_COUNTERS.items():
            family = CounterMetricFamily(name, help_text, labels=self.names)
            for key, (*_, totals) in series.items():
                if totals:
                    family.add_metric((*self.prefix, *key), totals[column])
            yield family
        for column, (name, help_text) in STATS_GAUGES.items():
            gauge = GaugeMetricFamily(name, help_text, labels=self.names)
            scale = 1e-3 if column.endswith("_ms") else 1.0
            for key, (*_, stats, _) in series.items():
                newest = max((at for at, _ in stats), default=0.0)
                # averages of clients gone for two statistics intervals (removed, rebuilt) drop out
                values = [s[column] for at, s in stats if s.get(column) and at >= newest - 2 * STATS_INTERVAL_S]
                if values:
                    gauge.add_metric((*self.prefix, *key), sum(values) / len(values) * scale)
            yield gauge


def prometheus_buckets(counts: Counter) -> tuple[list[tuple[str, float]], float]:
    """Cumulative (le, count) pairs in seconds, +Inf last, and the sum of the values in seconds (each
    bucket's count at its representative value: within 1 % like the histogram itself)."""
    ordered = sorted(counts.items())
    buckets: list[tuple[str, float]] = []
    seen, position = 0, 0
    for bound in BOUNDS:
        while position < len(ordered) and ordered[position][0] <= bound:
            seen += ordered[position][1]
            position += 1
        buckets.append((f"{GAMMA**bound / 1e6:.6g}", seen))
    buckets.append(("+Inf", sum(counts.values())))
    total_us = sum(bucket_value(index) * count for index, count in ordered)
    return buckets, total_us / 1e6
