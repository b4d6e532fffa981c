"""scripts/bench/throughput_vs_kafka_perf.py reads Kafka's perf tools by their printed lines. The
samples are in the tools' own formats (org.apache.kafka.tools.ProducerPerformance.Stats.printWindow and
printTotal, ShareConsumerPerformance.printHeader, printShareConsumerProgress and printStats), with
numbers that agree with each other: 512-byte records, MB of 1024 * 1024 bytes."""

from datetime import datetime

import pytest

from tests.bench import bench_script

pytestmark = pytest.mark.unit

perf_output = bench_script("perf_output")

PRODUCER_OUTPUT = """\
1043201 records sent, 208598.5 records/sec (101.85 MB/sec), 12.3 ms avg latency, 210.0 ms max latency.
1101317 records sent, 220219.4 records/sec (107.53 MB/sec), 14.1 ms avg latency, 233.0 ms max latency.
4000000 records sent, 215982.721382 records/sec (105.46 MB/sec), 14.73 ms avg latency, 233.00 ms max latency, \
9 ms 50th, 41 ms 95th, 88 ms 99th, 201 ms 99.9th.
"""

SHARE_CONSUMER_OUTPUT = """\
start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, fetch.time.ms
2025-06-02 10:15:03:412, 2025-06-02 10:15:03:519, 0.2441, 2.2817, 4672.8972, 500, 107 for share consumer 1
2025-06-02 10:15:03:519, 2025-06-02 10:15:03:620, 12.4512, 120.8617, 247524.7525, 25500, 101 for share consumer 1
2025-06-02 10:15:01:250, 2025-06-02 10:15:09:750, 976.5625, 114.8897, 235294.1176, 2000000, 8500
"""


def test_the_producer_total_is_the_summary_line_not_a_window_line():
    total = perf_output.producer_total(PRODUCER_OUTPUT)
    assert total == perf_output.ProducerTotal(4_000_000, 215982.721382, 105.46, 14.73)
    assert total.records / total.records_per_s == pytest.approx(18.52, abs=1e-6)  # the measured seconds


def test_the_producer_total_of_an_older_tool_with_one_decimal_is_read_alike():
    older = "4000000 records sent, 215982.7 records/sec (105.46 MB/sec), 14.73 ms avg latency, 233.00 ms max "
    older += "latency, 9 ms 50th, 41 ms 95th, 88 ms 99th, 201 ms 99.9th.\n"
    assert perf_output.producer_total(older) == perf_output.ProducerTotal(4_000_000, 215982.7, 105.46, 14.73)


def test_the_steady_state_total_of_warmup_records_is_not_taken_for_the_total():
    steady = "3600000 steady state records sent, 216867.469880 records/sec (105.89 MB/sec), 13.91 ms avg latency, "
    steady += "233.00 ms max latency, 9 ms 50th, 40 ms 95th, 85 ms 99th, 199 ms 99.9th.\n"
    assert perf_output.producer_total(PRODUCER_OUTPUT + steady).records == 4_000_000


def test_output_without_a_summary_line_has_no_producer_total():
    windows_only = PRODUCER_OUTPUT.splitlines()[0] + "\n"
    assert perf_output.producer_total(windows_only) is None
    assert perf_output.producer_total("") is None


def test_the_share_consumer_lines_are_read_and_the_header_passed_over():
    stats = perf_output.share_stats(SHARE_CONSUMER_OUTPUT)
    assert [s.progress for s in stats] == [True, True, False]
    total = stats[-1]
    assert (total.mb, total.mb_per_s, total.records_per_s, total.records, total.ms) == (
        976.5625,
        114.8897,
        235294.1176,
        2_000_000,
        8500,
    )
    assert total.end - total.start == pytest.approx(8.5)  # the tool's fetch time, from subscribe on
    first = stats[0]
    assert (first.records, first.ms, first.records_per_s) == (500, 107, 4672.8972)
    assert first.end - total.start == pytest.approx(2.269)  # the first record came after the group join


def test_share_consumer_times_are_the_tools_local_date_format_to_the_millisecond():
    expected = datetime(2025, 6, 2, 10, 15, 3, 412_000).timestamp()
    assert perf_output.tool_time("2025-06-02 10:15:03:412") == pytest.approx(expected)


def test_share_consumer_warnings_and_per_consumer_metrics_are_not_stats_lines():
    other = (
        "WARNING: Exiting before consuming the expected number of records: timeout (120000 ms) exceeded. "
        "You can use the --timeout option to increase the timeout.\n"
        "Share consumer 1 consumption metrics- 2025-06-02 10:15:01:250, 2025-06-02 10:15:09:750, "
        "976.5625, 114.8897, 235294.1176, 2000000, 8500\n"
    )
    assert perf_output.share_stats(other) == []
    assert perf_output.share_stats(other + SHARE_CONSUMER_OUTPUT) == perf_output.share_stats(SHARE_CONSUMER_OUTPUT)
