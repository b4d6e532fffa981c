"""The few numbers dimster keeps of a Kafka client's own statistics, the same columns whichever
library the client runs: each library's module under dimster/clients/ fills them from its own
statistics (librdkafka's `statistics.interval.ms` JSON, the Java clients' `metrics()`). Counters
are cumulative since the client started; the summary turns them into rates and ratios. An average
a library does not report is 0."""

from dimster.metrics.schema import REQUEST_KINDS, STATS_COLUMNS

COLUMNS = STATS_COLUMNS  # the client_stats table's columns, one row each in metrics/schema.py
__all__ = ["COLUMNS", "REQUEST_KINDS"]
