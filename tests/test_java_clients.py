"""`clientLibrary: java`, Kafka's own Java clients, on the real `local` cluster: share.acquire.mode as
the reference post describes it, runs that mix both libraries, the Java clients' metrics in the
summary, and their property checks."""

import json
from pathlib import Path

import pytest

from tests.conftest import dimster
from tests.runs import run_info, run_to_end, summarized, table, write_workload
from tests.test_live import modify, no_loss, status, stop_and_read, wait

# Producer batches of ~200 records (linger.ms 100 at 2,000 msg/s) against max.poll.records 10. The
# Java clients' statistics come every 5 s: 10 s of load give each consumer at least two reports (the
# ratios are their difference), however slowly the machine lets the group start.
BIG_BATCHES = {
    "partitionsPerTopic": 1,
    "messageSize": 200,
    "producersPerTopic": 1,
    "producerRate": 2000,
    "consumersPerGroup": 2,
    "durationSeconds": 10,
}
MAX_POLL_RECORDS = 10


def big_batches_run(tmp_path, mode: str):
    tmp_path.mkdir()
    return run_to_end(
        tmp_path,
        f"acquire-{mode.replace('_', '-')}",
        **BIG_BATCHES,
        clientLibrary={"shareConsumer": "java"},
        kafkaConfig={
            "producerConfig": {"linger.ms": 100, "batch.size": 65536},
            "shareConsumerConfig": {"max.poll.records": MAX_POLL_RECORDS, "share.acquire.mode": mode},
        },
    )


def consumer_intervals(bundle):
    intervals = table(bundle, "intervals")
    return intervals[intervals.role == "share_consumer"]


@pytest.mark.kafka
def test_acquire_modes_as_the_reference_post_describes_them(tmp_path, spark):
    """batch_optimized acquires whole batches, so polls exceed max.poll.records; record_limit caps
    them, and the broker then sends each batch several times (bytes fetched per byte consumed)."""
    optimized = big_batches_run(tmp_path / "a", "batch_optimized")
    limited = big_batches_run(tmp_path / "b", "record_limit")
    summaries = {}
    for bundle in (optimized, limited):
        totals = run_info(bundle)["totals"]
        assert totals["sent"] == totals["received"] > 10_000 and totals["lost"] == totals["duplicates"] == 0
        assert set(consumer_intervals(bundle).library) == {"java"}
        summaries[bundle] = summarized(bundle, spark)
        assert summaries[bundle]["client_stats"]["producer_batch_records_avg"] > 5 * MAX_POLL_RECORDS

    assert consumer_intervals(optimized).max_poll_records.max() > MAX_POLL_RECORDS
    polled = consumer_intervals(limited)
    assert polled.polls.sum() > 0 and polled.max_poll_records.max() <= MAX_POLL_RECORDS
    assert summaries[limited]["polls"]["max_records_in_a_poll"] <= MAX_POLL_RECORDS
    fetched = {b: summaries[b]["client_stats"]["rx_bytes_per_consumed_byte"] for b in (optimized, limited)}
    assert fetched[limited] > 2 * fetched[optimized]


@pytest.mark.kafka
@pytest.mark.parametrize(
    ("consumer_type", "libraries"),
    [
        ("SHARE_GROUP", {"producer": "java", "shareConsumer": "librdkafka"}),
        ("SHARE_GROUP", {"producer": "librdkafka", "shareConsumer": "java"}),
        ("CONSUMER_GROUP", {"producer": "java", "consumer": "java"}),
    ],
)
def test_mixed_libraries_lose_nothing(tmp_path, spark, consumer_type, libraries):
    name = "mixed-" + "-".join(f"{role[0]}{lib[0]}" for role, lib in libraries.items())
    all_java = set(libraries.values()) == {"java"}
    bundle = run_to_end(tmp_path, name, consumerType=consumer_type, clientLibrary=libraries, durationSeconds=8)
    totals = run_info(bundle)["totals"]
    assert totals["sent"] > 3_500
    assert totals["acked"] == totals["sent"] == totals["received"]
    assert totals["lost"] == 0 and totals["duplicates"] == 0 and totals["backlog"] == 0
    intervals = table(bundle, "intervals")
    consumer_role = "share_consumer" if consumer_type == "SHARE_GROUP" else "consumer"
    consumer_library = libraries.get("shareConsumer" if consumer_type == "SHARE_GROUP" else "consumer")
    assert set(intervals[intervals.role == "producer"].library) == {libraries["producer"]}
    assert set(intervals[intervals.role == consumer_role].library) == {consumer_library}
    # Both libraries' statistics fill the same columns: sent and fetched counts, batch sizes.
    stats = table(bundle, "client_stats")
    producers, consumers = stats[stats.role == "producer"], stats[stats.role == consumer_role]
    assert producers.tx_msgs.max() > 0 and producers.batch_records_avg.max() > 0
    assert consumers.rx_bytes.max() > 0 and (consumers.requests_fetch + consumers.requests_sharefetch).max() > 0
    assert "Traceback" not in (bundle / "logs" / "worker-0.log").read_text()
    if all_java:  # the summary's batch and fetch ratios come from the Java clients' metrics alone
        ratios = summarized(bundle, spark)["client_stats"]
        assert ratios["producer_batch_records_avg"] >= 1 and ratios["consumer_fetch_requests"] > 0
        assert ratios["records_per_fetch"] > 0 and ratios["rx_bytes_per_consumed_byte"] > 0


@pytest.mark.kafka
def test_java_client_logs_go_to_the_worker_java_log(tmp_path):
    workload = write_workload(tmp_path, "java-log", clientLibrary="java", durationSeconds=3, warmupSeconds=0)
    results = tmp_path / "results"
    info_level = {"DIMSTER_CLIENT_JVM_OPTS": "-Ddimster.client.log.level=INFO"}
    result = dimster("run", "local", "-w", str(workload), "--results", str(results), "--no-summary", env=info_level)
    assert result.code == 0, result.stderr
    assert "ProducerConfig values" not in result.stdout + result.stderr and "StatusLogger" not in result.stderr
    [bundle] = list(results.iterdir())
    java_log = (bundle / "logs" / "worker-0.java.log").read_text()
    assert "ProducerConfig values" in java_log and "client.id = p0" in java_log
    assert run_info(bundle)["versions"]["java_clients"] == {"producer": "4.3.1", "share_consumer": "4.3.1"}


@pytest.mark.kafka
def test_live_switch_of_acquire_mode_caps_polls(tmp_path):
    """The reference post's step, live: --modify --set ...share.acquire.mode=record_limit."""
    path = write_workload(
        tmp_path,
        "live-acquire",
        **{**BIG_BATCHES, "durationSeconds": 0},
        clientLibrary={"shareConsumer": "java"},
        kafkaConfig={
            "producerConfig": {"linger.ms": 100, "batch.size": 65536},
            "shareConsumerConfig": {"max.poll.records": MAX_POLL_RECORDS},
        },
    )
    started = dimster(
        "run", "local", "-w", str(path), "--detach", "--json", "--no-summary", "--results", str(tmp_path / "r")
    )
    assert started.code == 0, started.stderr
    bundle = json.loads(started.stdout)["results"]
    try:
        wait(f"maxPollRecords>{MAX_POLL_RECORDS}")
        modify("kafkaConfig.shareConsumerConfig.share.acquire.mode=record_limit")
        wait(f"maxPollRecords<={MAX_POLL_RECORDS} and recordsPerPoll>0")
        wait(f"received>{status()['received'] + 4000}")
        # and back to librdkafka, which needs the Java-only key gone
        modify("clientLibrary.shareConsumer=librdkafka", "kafkaConfig.shareConsumerConfig.share.acquire.mode=null")
        wait(f"received>{status()['received'] + 4000}")
    finally:
        info, modifications = stop_and_read({"results": bundle})
    no_loss(info)
    assert [m["key"] for m in modifications][:1] == ["kafkaConfig.shareConsumerConfig.share.acquire.mode"]
    consumers = consumer_intervals(Path(bundle))
    by_generation = {g: rows for g, rows in consumers.groupby("generation")}
    # generation 1: batch_optimized; 2: record_limit; 3: librdkafka; 0: an interval that mixed two
    assert by_generation[1].max_poll_records.max() > MAX_POLL_RECORDS
    assert by_generation[2].polls.sum() > 0 and by_generation[2].max_poll_records.max() <= MAX_POLL_RECORDS
    assert set(by_generation[2].library) == {"java"} and set(by_generation[3].library) == {"librdkafka"}
    assert by_generation[3].received.sum() > 0


@pytest.mark.unit
@pytest.mark.parametrize(
    ("sets", "line"),
    [
        (
            ["clientLibrary=java", "kafkaConfig.producerConfig.lingr.ms=5"],
            "kafkaConfig.producerConfig: 'lingr.ms' is not a property of Kafka's Java producer "
            "(did you mean 'linger.ms'?)",
        ),
        (
            ["clientLibrary.shareConsumer=java", "kafkaConfig.shareConsumerConfig.share.acquire.mode=record_limt"],
            "kafkaConfig.shareConsumerConfig: Invalid value record_limt for configuration share.acquire.mode: "
            "Invalid value `record_limt` for configuration share.acquire.mode. "
            "The value must either be 'batch_optimized' or 'record_limit'.",
        ),
        (
            ["clientLibrary.shareConsumer=java", "kafkaConfig.shareConsumerConfig.enable.auto.commit=true"],
            "kafkaConfig.shareConsumerConfig: enable.auto.commit cannot be set when using a share group.",
        ),
        (
            ["clientLibrary=java", "kafkaConfig.commonConfig.acks=7"],
            "kafkaConfig.commonConfig: Invalid value 7 for configuration acks: String must be one of: all, -1, 0, 1",
        ),
        (
            ["clientLibrary=java", "kafkaConfig.commonConfig.lingr.ms=5"],
            "kafkaConfig.commonConfig: 'lingr.ms' is not a property of Kafka's Java producer or share consumer "
            "(did you mean 'linger.ms'?)",
        ),
        (  # the run's consumers are a share group, whose Java client refuses this consumer-group setting
            ["clientLibrary=java", "kafkaConfig.commonConfig.isolation.level=read_committed"],
            "kafkaConfig.commonConfig: isolation.level cannot be set when using a share group.",
        ),
    ],
)
def test_java_properties_are_judged_by_kafkas_java_clients(tmp_path, sets, line):
    workload = write_workload(tmp_path, "java-check")
    result = dimster("validate", str(workload), "--set", *sets)
    assert result.code == 2, result.stderr
    assert result.error_lines == [f"dimster: error: {workload}: {line}"]
    assert "Traceback" not in result.stderr


@pytest.mark.unit
def test_java_only_properties_pass_with_the_java_client(tmp_path):
    workload = write_workload(tmp_path, "java-ok")
    sets = [
        "clientLibrary.shareConsumer=java",
        "kafkaConfig.shareConsumerConfig.share.acquire.mode=record_limit",
        "kafkaConfig.shareConsumerConfig.fetch.max.wait.ms=100",
        "kafkaConfig.shareConsumerConfig.max.poll.records=30",
    ]
    result = dimster("validate", str(workload), "--set", *sets)
    assert result.code == 0, result.stderr
    assert ": ok: 'java-ok'" in " ".join(result.stdout.split())
