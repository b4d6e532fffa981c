"""scripts/bench/throughput_vs_kafka_perf.py without a cluster: the order in which the sides take
turns, and the medians and ratios it reports (scripts/bench/README.md describes both)."""

import argparse

import pytest

from tests.bench import bench_script

pytestmark = pytest.mark.unit

perf_measure = bench_script("perf_measure")
perf_report = bench_script("perf_report")
perf_side_by_side = bench_script("perf_side_by_side")

SIDES = ["kafka", "dimster-librdkafka", "dimster-java"]


def measured(side: str, records_per_s: float, cpu_s: float, kind: str = "producer", *more):
    """A run of 1,000,000 records (so that CPU µs per record is `cpu_s`)."""
    records, mb_per_s, seconds = 1_000_000, records_per_s * 512 / perf_measure.MB, 1_000_000 / records_per_s
    return perf_measure.Measurement(kind, side, records, seconds, records_per_s, mb_per_s, cpu_s, 0.0, *more)


def test_each_side_goes_first_in_turn_and_the_others_reverse_in_the_next_cycle():
    orders = [perf_side_by_side.side_order(SIDES, i) for i in range(6)]
    assert orders == [
        ["kafka", "dimster-librdkafka", "dimster-java"],
        ["dimster-librdkafka", "dimster-java", "kafka"],
        ["dimster-java", "kafka", "dimster-librdkafka"],
        ["kafka", "dimster-java", "dimster-librdkafka"],
        ["dimster-librdkafka", "kafka", "dimster-java"],
        ["dimster-java", "dimster-librdkafka", "kafka"],
    ]
    assert [perf_side_by_side.side_order(SIDES[:2], i)[0] for i in range(4)] == [SIDES[0], SIDES[1]] * 2


def test_a_warmup_round_of_a_fraction_of_the_records_comes_before_the_repetitions():
    args = argparse.Namespace(warmup=0.25, repeat=3)
    assert perf_side_by_side.rounds(2_000_000, args) == [
        ("warm-up", 500_000, 1),
        ("1/3", 2_000_000, 0),
        ("2/3", 2_000_000, 1),
        ("3/3", 2_000_000, 2),
    ]
    assert perf_side_by_side.rounds(10, argparse.Namespace(warmup=0, repeat=1)) == [("1/1", 10, 0)]


def test_every_library_is_compared_to_kafka_and_java_to_librdkafka():
    assert perf_report.ratio_pairs(SIDES) == [
        ("dimster-librdkafka", "kafka"),
        ("dimster-java", "kafka"),
        ("dimster-java", "dimster-librdkafka"),
    ]
    assert perf_report.ratio_pairs(SIDES[:2]) == [("dimster-librdkafka", "kafka")]
    assert perf_side_by_side.side_names(argparse.Namespace(libraries=["java"])) == ["kafka", "dimster-java"]


def test_the_summary_holds_the_medians_of_each_side_and_the_ratios_of_the_medians():
    results = [
        measured("kafka", 200_000, 2.0),
        measured("kafka", 220_000, 2.2),
        measured("kafka", 210_000, 9.0),  # a slow outlier of CPU: the median leaves it out
        measured("dimster-librdkafka", 100_000, 3.0),
        measured("dimster-librdkafka", 110_000, 3.3),
        measured("dimster-librdkafka", 90_000, 3.1),
    ]
    summary = perf_report.summarize(results, SIDES)
    sides, ratios = summary["producer"]["sides"], summary["producer"]["ratios"]
    assert list(sides) == ["kafka", "dimster-librdkafka"]  # java was not measured
    assert sides["kafka"]["records_per_s"] == 210_000
    assert sides["kafka"]["cpu_us_per_record"] == pytest.approx(2.2)
    assert sides["dimster-librdkafka"]["runs_records_per_s"] == [100_000, 110_000, 90_000]
    assert ratios == {
        "dimster-librdkafka / kafka": {
            "records_per_s": pytest.approx(100_000 / 210_000),
            "cpu_us_per_record": pytest.approx(3.1 / 2.2),
        }
    }


def test_share_consumers_also_report_the_steady_rate_from_the_first_record_on(capsys):
    results = [
        measured("kafka", 200_000, 2.0, "share_consumer", 250_000.0, {"first_record_after_s": 2.3}),
        measured("dimster-java", 150_000, 3.0, "share_consumer", 200_000.0, {"first_record_after_s": 1.1}),
    ]
    summary = perf_report.summarize(results, SIDES)
    assert summary["share_consumer"]["ratios"]["dimster-java / kafka"]["steady_records_per_s"] == 0.8
    perf_report.print_table(summary)
    lines = capsys.readouterr().out.splitlines()
    ratio = [line.split()[2] for line in lines if line.startswith("share_consumer  ratio") and "java / kafka" in line]
    assert ratio == ["0.75", "0.80"]  # the rate, then the steady rate
    assert any("first record after 2.30 s; runs: 250000" in line for line in lines)
