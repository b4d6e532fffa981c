"""What Kafka's perf tools print, read back as numbers: pure text, no Kafka.

The formats are the tools' own printf strings (org.apache.kafka.tools). ProducerPerformance's
`Stats.printTotal`: "%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max
latency, %d ms 50th, ... ms 99.9th." (`%.1f` records/sec in older versions; with --warmup-records a
second total, "%d steady state records sent, ...", which is not read). ShareConsumerPerformance's
`printStats`, the share group's summary: "start, end, MB, MB/sec, records/sec, records, fetch ms";
and `printShareConsumerProgress`, the same fields of one --reporting-interval followed by " for share
consumer <n>". Times are in the tools' default --date-format, `yyyy-MM-dd HH:mm:ss:SSS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

PERF_SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency")
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"  # the tools' default --date-format
SHARE_STATS = re.compile(
    rf"^(?P<start>{STAMP}), (?P<end>{STAMP}), (?P<mb>[\d.]+), (?P<mb_rate>[\d.]+), (?P<rate>[\d.]+), "
    r"(?P<count>\d+), (?P<ms>\d+)(?P<progress> for share consumer)?"
)


@dataclass(frozen=True)
class ProducerTotal:
    """ProducerPerformance's summary: every record acknowledged, timed up to the final flush."""

    records: int
    records_per_s: float
    mb_per_s: float
    avg_latency_ms: float


def producer_total(out: str) -> ProducerTotal | None:
    """The last summary line of ProducerPerformance's output (the one with percentiles; the lines of
    every 5 s window have none); None without one."""
    summary = [m for line in out.splitlines() if "50th" in line and (m := PERF_SUMMARY.search(line))]
    if not summary:
        return None
    sent, rate, mb_rate, latency = summary[-1].groups()
    return ProducerTotal(int(sent), float(rate), float(mb_rate), float(latency))


def tool_time(text: str) -> float:
    """A timestamp of the perf tools' default --date-format, as epoch seconds (local time)."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S:%f").timestamp()


@dataclass(frozen=True)
class ShareStats:
    """One stats line of ShareConsumerPerformance: the share group's summary (subscribe to the last
    record), or with `progress` one consumer's report of one --reporting-interval (`start` is then
    the interval's start, `records` the consumer's count so far). Times are epoch seconds."""

    start: float
    end: float
    mb: float
    mb_per_s: float
    records_per_s: float
    records: int
    ms: int
    progress: bool


def share_stats(out: str) -> list[ShareStats]:
    """Every stats line of ShareConsumerPerformance's output, in order; other lines are passed over."""
    return [
        ShareStats(
            tool_time(m["start"]),
            tool_time(m["end"]),
            float(m["mb"]),
            float(m["mb_rate"]),
            float(m["rate"]),
            int(m["count"]),
            int(m["ms"]),
            bool(m["progress"]),
        )
        for line in out.splitlines()
        if (m := SHARE_STATS.match(line.strip()))
    ]
