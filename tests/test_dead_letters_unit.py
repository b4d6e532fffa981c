"""Dead-letter queues (KIP-1191) in dimster's own logic: the workload key, its group configs, what may
change live, why a cluster would write no dead-letter record, and the matching of a dead-letter topic's
records to the records a run rejected or archived."""

import re
from collections import Counter

import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.live.changes import live_changes
from dimster.coordinator.observers.dead_letters import match
from dimster.errors import DimsterError
from dimster.kafka.dead_letters import ClusterSettings, DeadLetters, refusal
from dimster.worker.protocol import ClientInterval
from dimster.workload.dead_letter import COPY_RECORD, TOPIC_NAME, DeadLetterQueue, dead_letter_group_config
from dimster.workload.model import parse_workload
from dimster.workload.modes.correctness import Correctness, correctness_verdict

pytestmark = pytest.mark.unit

GROUP, TOPIC = "g", "t"


def workload(**keys):
    return parse_workload({"name": "dlq", **keys}, "w.yaml")


def test_the_queue_becomes_two_group_configs_and_disabled_unsets_the_topic():
    assert dead_letter_group_config(None, "dlq.x") == {}
    queue = DeadLetterQueue()
    assert dead_letter_group_config(queue, "dlq.x") == {TOPIC_NAME: "dlq.x", COPY_RECORD: "false"}
    copying = DeadLetterQueue(copyRecord=True, enabled=False)
    assert dead_letter_group_config(copying, "dlq.x") == {COPY_RECORD: "true"}


@pytest.mark.parametrize(
    ("keys", "line"),
    [
        ({"consumerType": "CONSUMER_GROUP", "deadLetterQueue": {}}, "deadLetterQueue needs consumerType: SHARE_GROUP"),
        ({"deadLetterQueue": {"topic": "__consumer_offsets"}}, "must not start with '__'"),
        ({"deadLetterQueue": {"topic": "a b"}}, "deadLetterQueue.topic"),
        ({"deadLetterQueue": {"copy": True}}, "deadLetterQueue.copy"),
    ],
)
def test_a_queue_the_run_cannot_have_is_one_line(keys, line):
    with pytest.raises(DimsterError, match=line) as refused:
        workload(**keys)
    assert "\n" not in str(refused.value)


def test_enabled_and_copy_record_change_live_and_the_topic_does_not():
    old = workload(deadLetterQueue={"topic": "dlq.a"}).to_yaml_dict()
    copying = workload(deadLetterQueue={"topic": "dlq.a", "copyRecord": True, "enabled": False}).to_yaml_dict()
    assert {(c.key, c.effect) for c in live_changes(old, copying)} == {
        ("deadLetterQueue.copyRecord", "group-config"),
        ("deadLetterQueue.enabled", "group-config"),
    }
    with pytest.raises(ValueError, match=r"'deadLetterQueue\.topic' cannot change during a run: a run's dead-letter"):
        live_changes(old, workload(deadLetterQueue={"topic": "dlq.b"}).to_yaml_dict())
    with pytest.raises(ValueError, match=r"'deadLetterQueue\.\w+' cannot change during a run: a run's dead-letter"):
        live_changes(workload().to_yaml_dict(), old)


@pytest.mark.parametrize(
    ("queue", "topic", "settings", "line"),
    [
        ({}, "dlq.a", ClusterSettings(1, "dlq.", False), "needs share.version=2 .* has share.version=1"),
        ({}, "dead.a", ClusterSettings(2, "dlq.", False), "'dead.a' does not start with .* 'dlq.'"),
        ({"createTopic": False}, "dlq.a", ClusterSettings(2, "dlq.", False), "auto.create.topics.enable=true"),
    ],
)
def test_a_cluster_that_would_archive_in_silence_is_refused(queue, topic, settings, line):
    assert re.search(line, refusal(DeadLetterQueue(**queue), topic, settings, "4.3.1"))


def test_a_cluster_that_writes_dead_letters_is_not_refused():
    assert refusal(DeadLetterQueue(), "dlq.a", ClusterSettings(2, "dlq.", False), "4.4.0") is None
    assert refusal(DeadLetterQueue(), "any", ClusterSettings(2, "", False), "4.4.0") is None
    assert refusal(DeadLetterQueue(createTopic=False), "dlq.a", ClusterSettings(2, "dlq.", True), "4.4.0") is None


def aggregate_with(rejected: list[int], archived: list[int], producer: int = 7) -> RunAggregate:
    a = RunAggregate({GROUP: TOPIC})
    a.outcomes.add(
        GROUP,
        0,
        ClientInterval(
            "c",
            "share_consumer",
            TOPIC,
            group=GROUP,
            settled_rejected={(producer, 1): [(s, s) for s in rejected]},
            settled_archived={producer: [(s, s) for s in archived]},
        ),
    )
    return a


def letters(found: dict[int, int], copied: bool = False, producer: int = 7) -> tuple[DeadLetters, dict]:
    """Dead-letter records of offsets (offset == sequence here) found `n` times each."""
    sources = {offset: (GROUP, TOPIC, 0, offset) for offset in found}
    read = DeadLetters(Counter({sources[o]: n for o, n in found.items()}), {}, 0)
    known = {sources[o]: (producer, o) for o in found}
    if copied:
        read.copied = known
    return read, known


def test_every_rejected_and_archived_record_found_once_closes_the_identity():
    a = aggregate_with(rejected=[1, 4], archived=[9])
    counts = match(a, *letters({1: 1, 4: 1, 9: 1}))
    assert counts[GROUP] == {
        "dead_lettered": 3, "dead_letter_missing": 0, "dead_letter_duplicates": 0, "dead_letter_unexpected": 0
    }  # fmt: skip


def test_a_record_missing_a_copy_too_many_and_one_settled_otherwise_are_each_counted():
    a = aggregate_with(rejected=[1, 4], archived=[9])
    read, known = letters({1: 3, 9: 1, 12: 1})  # 4 missing, 1 three times, 12 was accepted
    del known[(GROUP, TOPIC, 0, 9)]  # its source record could not be read
    assert match(a, read, known)[GROUP] == {
        "dead_lettered": 3, "dead_letter_missing": 2, "dead_letter_duplicates": 2, "dead_letter_unexpected": 2
    }  # fmt: skip


def test_a_correctness_run_fails_on_a_missing_or_duplicated_dead_letter():
    clean = {"lost": 0, "unconsumed": 0, "dead_letter_missing": 0, "dead_letter_duplicates": 0}
    assert correctness_verdict(Correctness(type="correctness"), clean, "SHARE_GROUP")["passed"]
    verdict = correctness_verdict(
        Correctness(type="correctness"), {**clean, "dead_letter_missing": 2, "dead_letter_duplicates": 1}, "SHARE_GROUP"
    )
    assert not verdict["passed"] and verdict["reasons"] == ["2 dead letter missing", "1 dead letter duplicates"]


def test_a_queue_never_enabled_expects_nothing_and_one_switched_live_cannot_tell_what_is_missing():
    a = aggregate_with(rejected=[1, 4], archived=[])
    never = match(a, *letters({}), states={False})[GROUP]
    assert (never["dead_lettered"], never["dead_letter_missing"]) == (0, 0)
    switched = match(a, *letters({1: 1}), states={True, False})[GROUP]
    assert (switched["dead_lettered"], switched["dead_letter_missing"], switched["dead_letter_unexpected"]) == (
        1, None, 0
    )  # fmt: skip


def test_the_console_window_carries_the_live_dead_letter_count():
    from dimster.coordinator.control.console import status_line

    a = RunAggregate({GROUP: TOPIC})
    assert "dlq" not in status_line(1.0, "measure", a.take_window())  # a run without a queue
    a.dead_lettered = 42
    assert status_line(2.0, "measure", a.take_window()).endswith(" | dlq 42")


@pytest.mark.parametrize("broken", ["cluster", "bug"])
def test_a_topic_that_cannot_be_read_leaves_the_count_unknown_but_a_bug_fails_loudly(monkeypatch, broken):
    """The cluster's refusal (a KafkaException) is a note and `dead_lettered` unknown, the run's other
    numbers standing; a bug while reading it (a KeyError) is raised, never a silently weaker check."""
    from types import SimpleNamespace

    from confluent_kafka import KafkaError, KafkaException

    from dimster.coordinator.observers import dead_letters

    told: list[str] = []
    log = SimpleNamespace(tell=lambda kind, line, **details: told.append(kind))
    kafka = SimpleNamespace(
        dead_letter_topic="dlq.g", dead_letter_states={False}, bootstrap="127.0.0.1:9", security=None,
        dead_letter_partitions=lambda: 0,  # no topic yet: nothing to wait for
    )  # fmt: skip
    a = RunAggregate({GROUP: TOPIC})

    def read(*_args):
        if broken == "cluster":
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        raise KeyError("__dlq.errors.offset")

    monkeypatch.setattr(dead_letters, "read_sources", read)
    watch = dead_letters.DeadLetterWatch(kafka, a, log)  # type: ignore[arg-type]
    a.dead_lettered = 3  # the count while the run went
    if broken == "cluster":
        watch.finish()
        assert told == ["dead_letters_unread"] and a.dead_lettered is None
    else:
        with pytest.raises(KeyError):
            watch.finish()
        assert told == [] and a.dead_lettered == 3
