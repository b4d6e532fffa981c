"""Compression and the workers' CPU on real runs: the payload the producer was handed against the
bytes the brokers took in for the run's topic (their own per-topic counters), without compression
and with zstd, on compressible records; a producer-only worker's CPU per MB."""

import os

import pytest

from tests.runs import run_info, run_to_end, summarized

COMPRESSIBLE = {"type": "COMPRESSIBLE", "compressibleRatio": 0.9}


def producer_only_run(tmp_path, spark: str, codec: str, library: str) -> tuple[dict, dict]:
    (tmp_path / codec).mkdir()
    bundle = run_to_end(
        tmp_path / codec,
        f"compress-{codec}",
        groupsPerTopic=0,
        producersPerTopic=1,
        producerRate=500,
        messageSize=1024,
        payload=COMPRESSIBLE,
        warmupSeconds=1,
        durationSeconds=6,
        clientLibrary=library,
        kafkaConfig={"producerConfig": {"linger.ms": 20, "compression.type": codec}},
    )
    return summarized(bundle, spark), run_info(bundle)


@pytest.mark.kafka
def test_the_brokers_take_in_the_payload_and_its_framing_without_compression_and_far_less_with_it(tmp_path, spark):
    plain, info = producer_only_run(tmp_path, spark, "none", "librdkafka")
    sent = info["totals"]["sent"]
    assert sent > 0 and plain["compression"]["payload_bytes"] == sent * 1024
    # every byte handed over reached the brokers, with the batches' framing on top (a few %)
    assert 0.9 < plain["compression"]["ratio"] < 1.0, plain["compression"]
    cpu = plain["worker_cpu"]
    assert 0 < cpu["cores"] < os.cpu_count(), cpu
    assert cpu["producer_cpu_seconds_per_mb"] > 0 and cpu["consumer_cpu_seconds_per_mb"] is None, cpu

    zstd, _ = producer_only_run(tmp_path, spark, "zstd", "java")
    assert zstd["compression"]["ratio"] > 3, zstd["compression"]  # 90 % of each record repeats
    rate = zstd["compression"]["producer_compression_rate_avg"]
    assert rate is not None and 0 < rate < 1 / 3, zstd["compression"]  # the Java producer's own view agrees
