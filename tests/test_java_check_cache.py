"""What Kafka's Java clients said of a workload's properties is kept (dimster/clients/check_cache.py):
the same properties are not judged by a JVM again, other properties are, and properties that make a
client read files or hold a secret are neither read from nor written to the cache."""

import json

import pytest

from dimster.clients import check_cache
from dimster.paths import cache_dir
from tests.conftest import dimster
from tests.runs import write_workload

pytestmark = pytest.mark.unit

JAVA = ["clientLibrary=java", "kafkaConfig.producerConfig.linger.ms=7"]


def test_a_verdict_is_taken_from_the_cache_for_the_same_properties_and_never_for_ssl_ones(tmp_path):
    cache = tmp_path / "cache"  # Kafka's jars as they are, verdicts of this test's own
    cache.mkdir()
    for entry in cache_dir().iterdir():
        if entry.name != "client-checks":
            (cache / entry.name).symlink_to(entry)
    env = {"DIMSTER_CACHE_DIR": str(cache)}
    workload = write_workload(tmp_path, "java-kept")

    first = dimster("validate", str(workload), "--set", *JAVA, env=env)
    assert first.code == 0, first.stderr
    [kept] = (cache / "client-checks").iterdir()
    assert json.loads(kept.read_text()) == [None, None]

    kept.write_text(json.dumps([None, "kafkaConfig.producerConfig: planted"]))
    again = dimster("validate", str(workload), "--set", *JAVA, env=env)
    assert again.error_lines == [f"dimster: error: {workload}: kafkaConfig.producerConfig: planted"], again.stderr

    ssl = [*JAVA, "kafkaConfig.commonConfig.ssl.endpoint.identification.algorithm=https"]
    judged = dimster("validate", str(workload), "--set", *ssl, env=env)
    assert judged.code == 0, judged.stderr  # judged by the JVM, not the planted verdict: and not kept
    assert list((cache / "client-checks").iterdir()) == [kept]


def test_the_key_names_the_version_the_roles_and_every_property():
    sections = {"producerConfig": {"linger.ms": 7}}
    base = check_cache.key("4.4.0", ["producer"], {"acks": "all"}, sections)
    assert base == check_cache.key("4.4.0", ["producer"], {"acks": "all"}, {"producerConfig": {"linger.ms": 7}})
    others = {
        check_cache.key("4.3.1", ["producer"], {"acks": "all"}, sections),
        check_cache.key("4.4.0", ["producer", "share_consumer"], {"acks": "all"}, sections),
        check_cache.key("4.4.0", ["producer"], {"acks": "1"}, sections),
        check_cache.key("4.4.0", ["producer"], {"acks": "all"}, {"producerConfig": {"linger.ms": 8}}),
    }
    assert base not in others and len(others) == 4


def test_files_and_secrets_are_never_kept():
    assert check_cache.cacheable({"acks": "all"}, {"producerConfig": {"linger.ms": 7}})
    assert not check_cache.cacheable({"ssl.truststore.location": "/x"}, {})
    assert not check_cache.cacheable({}, {"producerConfig": {"sasl.jaas.config": "x"}})
    assert not check_cache.cacheable({}, {"shareConsumerConfig": {"basic.auth.user.password": "x"}})
