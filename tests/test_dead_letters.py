"""Dead-letter queues (KIP-1191) on the session's `local` (Kafka 4.4.0, share.version=2): a share group
rejects a known fraction of its records and lets others time out on their last delivery; each such
record is in the dead-letter topic once, as the topic itself says when this test reads it, and
dimster's figures say the same. On a 4.3 cluster the workload is refused in one line."""

from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from dimster.environment import load_environment
from dimster.workload.payload import unpack_header
from tests.conftest import dimster, spare_ports_yaml, write_environment
from tests.runs import BASE, cpu_hog, events, modify, only_bundle, run_info, start_detached, wait, write_workload

pytestmark = pytest.mark.kafka

LOCK_MS = 1000  # the shortest the suite's broker allows
EXCEEDED = "Offset delivery count exceeded the threshold."
LIMIT = 2  # deliveries: a record whose lock runs out twice is archived, and dead-lettered
# One record per poll, processed for 0 to 2 lock durations (about half outlast their lock), a fifth
# of those acknowledged in time rejected: both ways into the dead-letter topic in one short run.
DEAD_LETTERS = {
    **BASE,
    "partitionsPerTopic": 2,
    "messageSize": 128,
    "producersPerTopic": 1,
    "producerRate": 6,
    "durationSeconds": 8,
    "warmupSeconds": 0,
    "reportIntervalSeconds": 2,
    "drainTimeoutSeconds": 60,
    "consumersPerGroup": 6,
    "consumerProcMsMin": 0,
    "consumerProcMsMax": 2 * LOCK_MS,
    "keepTopics": True,  # the test reads the dead-letter topic itself, then deletes it
    "acknowledgement": {"mode": "EXPLICIT", "rejectFraction": 0.2},
    "clientLibrary": {"shareConsumer": "java"},
    "groupConfig": {"share.record.lock.duration.ms": LOCK_MS, "share.delivery.count.limit": LIMIT},
    "deadLetterQueue": {},
    "kafkaConfig": {
        "producerConfig": {"linger.ms": 0},
        "shareConsumerConfig": {"max.poll.records": 1, "share.acquire.mode": "record_limit"},
    },
}


def read_topic(bootstrap: str, topic: str) -> list:
    """Every record of `topic`, from its start to its end now."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-test", "enable.auto.commit": False})
    partitions = reader.list_topics(topic, timeout=10).topics[topic].partitions
    ends = {p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p, end in ends.items() if end])
    records: list = []
    while len(records) < sum(ends.values()):
        records += [m for m in reader.consume(1000, 5.0) if m.error() is None]
    reader.close()
    return records


@pytest.mark.parametrize("library", ["java", "librdkafka"])
def test_rejected_and_last_delivery_records_are_dead_lettered_once_and_the_account_closes(
    local_cluster, tmp_path, library
):
    """Beside a CPU hog that keeps both cores busy (the host of a load generator is busy by definition),
    with a share consumer crashed mid-run, for each client library."""
    keys = {**DEAD_LETTERS, "consumerCrashes": [{"atSeconds": 4, "consumers": 1}]}
    if library == "librdkafka":  # record_limit and max.poll.records are the Java client's
        keys |= {"clientLibrary": {"shareConsumer": "librdkafka"}, "kafkaConfig": {"producerConfig": {"linger.ms": 0}}}
    workload = write_workload(tmp_path, "dlq", **keys)
    results = tmp_path / "results"
    with cpu_hog(seconds=120):
        result = dimster("run", "local", "-w", str(workload), "--results", str(results), "--no-summary", timeout=300)
    assert result.code == 0 and "run completed" in result.stdout, result.stderr + result.stdout
    bundle = only_bundle(results)
    info = run_info(bundle)
    topic = info["deadLetterQueue"]["topic"]
    assert info["deadLetterQueue"] == {"topic": topic, "copyRecord": False, "createTopic": True, "createdBy": "dimster"}
    [(group, account)] = info["account"].items()
    rejected, archived = account["rejected"], account["archived"]
    assert rejected > 0 and archived > 0 and account["closes"] and account["lost"] == 0, account

    bootstrap = load_environment("local").bootstrap_servers
    records = read_topic(bootstrap, topic)
    headers = [{k: v.decode() for k, v in m.headers()} for m in records]
    sources = Counter((h["__dlq.errors.topic"], h["__dlq.errors.partition"], h["__dlq.errors.offset"]) for h in headers)
    assert {h["__dlq.errors.group"] for h in headers} == {group}
    assert len(sources) == len(records) == rejected + archived  # each once: none missing, none twice
    assert all(m.value() is None and m.key() is None for m in records)  # copyRecord off: metadata only
    # the cause: the client's reject, or the delivery count's (a lock running out on the last delivery,
    # and as the broker tells it at times, a reject on the last delivery)
    causes = Counter((h["__dlq.errors.message"], h["__dlq.errors.delivery.count"]) for h in headers)
    by_client = sum(n for (message, _), n in causes.items() if message == "Offset rejected by client.")
    exceeded = causes[(EXCEEDED, str(LIMIT))]
    assert by_client + exceeded == len(records) and by_client <= rejected and exceeded >= archived, causes

    # The topic is the account's referee: where dimster's own count differed (a busy host: the broker
    # may answer "settled" for a reject whose lock had run out), each record is an event with its story,
    # and dimster's disagreement stays in the figures: missing (it counted rejected or archived, the
    # topic does not hold it: in doubt) and unexpected (the topic holds it, dimster counted otherwise).
    totals, [read] = info["totals"], events(bundle, "dead_letters_read")
    corrected = events(bundle, "dead_letter_corrected")
    unconfirmed = [c for c in corrected if c["broker"] == "not dead-lettered"]
    assert (totals["dead_lettered"], totals["dead_letter_duplicates"]) == (rejected + archived, 0)
    assert totals["dead_letter_missing"] == len(unconfirmed) <= account["in_doubt"]
    assert read["dead_letter_unexpected"] == len(corrected) - len(unconfirmed)
    for story in corrected:  # each names the record and what dimster saw of it
        assert story["group"] == group and story["counted"] in ("accepted", "not settled", "rejected", "archived")
    AdminClient({"bootstrap.servers": bootstrap}).delete_topics([topic, *info["topics"]])


def test_a_cluster_below_4_4_refuses_a_dead_letter_queue_in_one_line(tmp_path, project):
    """On 4.3.1 (share.version=1) the broker would archive rejected records in silence: refused."""
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    write_environment(project, "dlq43", "nodes: 1\nkafkaVersion: 4.3.1\n" + spare_ports_yaml())
    workload = write_workload(tmp_path, "dlq43", **{**BASE, "durationSeconds": 1, "deadLetterQueue": {}})
    try:
        assert dimster("cluster", "up", "dlq43", env=env).code == 0
        result = dimster("run", "dlq43", "-w", str(workload), "--results", str(tmp_path / "r"), "--no-summary", env=env)
        errors = [line for line in result.stderr.splitlines() if line.startswith("dimster: error:")]
        assert result.code != 0 and len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
        for fragment in ("deadLetterQueue needs share.version=2", "kafkaVersion 4.3.1", "has share.version=1"):
            assert fragment in errors[0], errors
    finally:
        assert dimster("cluster", "down", "dlq43", env=env).code == 0


def test_copy_record_switched_on_live_copies_what_comes_after_and_the_topic_cannot_change(local_cluster, tmp_path):
    """`--modify --set deadLetterQueue.copyRecord=true` is a group config changed on the broker with no
    restart: dead letters written before it carry metadata only, those after it the record too; the
    live count feeds `wait`; the topic itself is refused live in one line."""
    keys = {"producerRate": 200, "keepTopics": True, "deadLetterQueue": {},
            "acknowledgement": {"mode": "EXPLICIT", "rejectFraction": 0.2}}  # fmt: skip
    bundle = start_detached(tmp_path, "dlqlive", **keys)
    bootstrap = load_environment("local").bootstrap_servers
    try:
        wait("dead_lettered>=40")  # the topic's live count
        applied = modify("deadLetterQueue.copyRecord=true")["applied"]
        assert [(c["key"], c["new"], c["effect"]) for c in applied] == [
            ("deadLetterQueue.copyRecord", True, "group-config")
        ]
        [group] = run_info(bundle)["groups"]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        [described] = admin.describe_configs([ConfigResource(ConfigResource.Type.GROUP, group)]).values()
        assert described.result(timeout=30)["errors.deadletterqueue.copy.record.enable"].value == "true"
        refused = dimster("run", "local", "--modify", "--set", "deadLetterQueue.topic=dlq.other")
        assert refused.code == 2 and len(refused.error_lines) == 1, refused.stderr
        assert "'deadLetterQueue.topic' cannot change during a run" in refused.error_lines[0]
        wait("received>=3000")
    finally:
        dimster("stop", "local")
    info = run_info(bundle)
    topic, totals = info["deadLetterQueue"]["topic"], info["totals"]
    records = read_topic(bootstrap, topic)
    copied = [unpack_header(m.value()) for m in records if m.value() is not None]
    assert 0 < len(copied) < len(records) and all(copied), (len(copied), len(records))
    assert (totals["dead_lettered"], totals["dead_letter_missing"], totals["dead_letter_duplicates"]) == (
        totals["rejected"], 0, 0
    ) and len(records) == totals["rejected"] > 0  # fmt: skip
    AdminClient({"bootstrap.servers": bootstrap}).delete_topics([topic, *info["topics"]])
