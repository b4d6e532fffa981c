"""`clientLibrary: java`, Kafka's own Java clients, on the real `local` cluster: share.acquire.mode as
the reference post describes it, switched live, runs that mix both libraries, the Java clients'
statistics and logs, and their property checks."""

import pytest

from dimster.environment import DEFAULT_KAFKA_VERSION
from tests.conftest import dimster
from tests.runs import (
    modifications,
    modify,
    no_loss,
    run_info,
    run_until,
    start_detached,
    status,
    stop,
    table,
    wait,
    write_workload,
)

# Producer batches of ~200 records (linger.ms 100 at 2,000 msg/s) against max.poll.records 10.
BIG_BATCHES = {
    "partitionsPerTopic": 1,
    "messageSize": 200,
    "producersPerTopic": 1,
    "producerRate": 2000,
    "consumersPerGroup": 2,
    "warmupSeconds": 0,
}
MAX_POLL_RECORDS = 10
# Kafka's Java clients report their statistics every 5 s: 11 s of a setting give each client two.
TWO_STATISTICS_S = 11


def consumer_intervals(bundle):
    intervals = table(bundle, "intervals")
    return intervals[intervals.role == "share_consumer"]


def fetched_per_consumed(stats, start: float, end: float) -> float:
    """Bytes the share consumers fetched per byte of records they consumed, from the last statistics
    each reported between `start` and `end` (a Java client counts both from its creation)."""
    rows = stats[(stats.role == "share_consumer") & (stats.end_time > start) & (stats.end_time < end)]
    last = rows.sort_values("end_time").groupby("client_id").tail(1)
    assert len(last) == BIG_BATCHES["consumersPerGroup"] and (last.rx_msg_bytes > 0).all(), rows
    return last.rx_bytes.sum() / last.rx_msg_bytes.sum()


@pytest.mark.kafka
def test_acquire_modes_as_the_reference_post_describes_them_switched_live(tmp_path):
    """The reference post's step, live (`--modify --set ...share.acquire.mode=record_limit`):
    batch_optimized acquires whole batches, so polls exceed max.poll.records; record_limit caps them,
    and the broker then sends each batch several times (bytes fetched per byte consumed). Then back to
    librdkafka, which needs the Java-only key gone."""
    bundle = start_detached(
        tmp_path,
        "live-acquire",
        **BIG_BATCHES,
        clientLibrary={"shareConsumer": "java"},
        kafkaConfig={
            "producerConfig": {"linger.ms": 100, "batch.size": 65536},
            "shareConsumerConfig": {"max.poll.records": MAX_POLL_RECORDS},
        },
    )
    try:
        wait(f"maxPollRecords>{MAX_POLL_RECORDS} and elapsedSeconds>={TWO_STATISTICS_S}")
        [limit] = modify("kafkaConfig.shareConsumerConfig.share.acquire.mode=record_limit")["applied"]
        switched = status()["elapsedSeconds"]
        wait(f"maxPollRecords<={MAX_POLL_RECORDS} and recordsPerPoll>0")
        wait(f"received>{status()['received'] + 4000} and elapsedSeconds>={switched + TWO_STATISTICS_S}")
        library = "clientLibrary.shareConsumer=librdkafka"
        back = modify(library, "kafkaConfig.shareConsumerConfig.share.acquire.mode=null")["applied"]
        wait(f"received>{status()['received'] + 4000}")
    finally:
        stop()
    no_loss(run_info(bundle))
    assert [m["key"] for m in modifications(bundle)][:1] == ["kafkaConfig.shareConsumerConfig.share.acquire.mode"]
    consumers = consumer_intervals(bundle)
    by_generation = {g: rows for g, rows in consumers.groupby("generation")}
    # generation 1: batch_optimized; 2: record_limit; 3: librdkafka; 0: an interval that mixed two
    assert set(by_generation[1].library) == set(by_generation[2].library) == {"java"}
    assert by_generation[1].max_poll_records.max() > MAX_POLL_RECORDS
    assert by_generation[2].polls.sum() > 0 and by_generation[2].max_poll_records.max() <= MAX_POLL_RECORDS
    assert set(by_generation[3].library) == {"librdkafka"} and by_generation[3].received.sum() > 0
    stats = table(bundle, "client_stats")
    assert stats[stats.role == "producer"].batch_records_avg.max() > 5 * MAX_POLL_RECORDS
    optimized = fetched_per_consumed(stats, 0, limit["applied"])
    limited = fetched_per_consumed(stats, limit["applied"] + 2, min(change["applied"] for change in back))
    assert limited > 2 * optimized, (optimized, limited)


@pytest.mark.kafka
@pytest.mark.parametrize(
    "libraries",
    [{"producer": "java", "shareConsumer": "librdkafka"}, {"producer": "librdkafka", "shareConsumer": "java"}],
    ids=["java-producers", "java-share-consumers"],
)
def test_mixed_libraries_lose_nothing(tmp_path, libraries):
    """Both libraries' statistics fill the same columns; the Java clients' own log goes to the worker's
    Java log, not the console. (An all-Java consumer group: tests/test_client_versions.py.)"""
    name = "mixed-" + "-".join(f"{role[0]}{lib[0]}" for role, lib in libraries.items())
    info_level = {"DIMSTER_CLIENT_JVM_OPTS": "-Ddimster.client.log.level=INFO"}
    bundle = run_until(tmp_path, name, "received>=3000", cli_env=info_level, clientLibrary=libraries)
    info = run_info(bundle)
    totals = info["totals"]
    assert totals["acked"] == totals["sent"] == totals["received"]
    assert totals["lost"] == 0 and totals["duplicates"] == 0 and totals["backlog"] == 0
    intervals = table(bundle, "intervals")
    assert set(intervals[intervals.role == "producer"].library) == {libraries["producer"]}
    assert set(intervals[intervals.role == "share_consumer"].library) == {libraries["shareConsumer"]}
    stats = table(bundle, "client_stats")
    producers, consumers = stats[stats.role == "producer"], stats[stats.role == "share_consumer"]
    assert producers.tx_msgs.max() > 0 and producers.batch_records_avg.max() > 0
    assert consumers.rx_bytes.max() > 0 and (consumers.requests_fetch + consumers.requests_sharefetch).max() > 0
    java_role = "producer" if libraries["producer"] == "java" else "share_consumer"
    assert info["versions"]["java_clients"] == {java_role: DEFAULT_KAFKA_VERSION}
    java_log = (bundle / "logs" / "worker-0.java.log").read_text()
    client = "p0" if java_role == "producer" else "c0"
    assert f"client.id = {client}" in java_log and "Config values" in java_log
    worker_log = (bundle / "logs" / "worker-0.log").read_text()
    assert "Config values" not in worker_log and "StatusLogger" not in worker_log and "Traceback" not in worker_log


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


@pytest.mark.unit
def test_a_detached_run_judges_java_properties_before_it_starts_its_run(tmp_path):
    """`run --detach` judges the properties itself and its run's process does not judge them again (a
    Java check starts a JVM: two seconds of CPU each)."""
    workload = write_workload(tmp_path, "java-detach")
    sets = ["clientLibrary=java", "kafkaConfig.producerConfig.lingr.ms=5"]
    result = dimster("run", "local", "-w", str(workload), "--detach", "--results", str(tmp_path / "r"), "--set", *sets)
    assert result.code == 2, result.stderr
    assert result.error_lines == [
        f"dimster: error: {workload}: kafkaConfig.producerConfig: 'lingr.ms' is not a property of Kafka's Java "
        "producer (did you mean 'linger.ms'?)"
    ]
    assert not (tmp_path / "r").exists()  # no run began
