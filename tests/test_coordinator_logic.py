"""Pure parts of the coordinator: topology and resizing, what may change live, wait conditions,
pacing checks, secret redaction."""

import random

import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.window import RecentRates
from dimster.coordinator.control.conditions import holds, parse_condition
from dimster.coordinator.live.changes import flatten, live_changes
from dimster.coordinator.loop.limit_watch import producer_batches
from dimster.coordinator.workers.topology import (
    build_topology,
    clients_by_worker,
    least_loaded,
    place,
    resize,
    split_roles,
)
from dimster.errors import DimsterError
from dimster.results.bundle import redact, redact_argv
from dimster.worker.protocol import ClientInterval, ConsumerSpec, ProducerSpec, worker_report
from dimster.workload.model import Workload

pytestmark = pytest.mark.unit


def workload(**keys) -> Workload:
    return Workload.model_validate({"name": "w", **keys})


def test_topology_names_and_counts():
    t = build_topology(workload(topics=2, producersPerTopic=3, groupsPerTopic=2, consumersPerGroup=4), "abc")
    assert t.topics == ["w-abc-0", "w-abc-1"]
    assert len(t.producers) == 6 and len(t.consumers) == 16
    assert t.groups == {
        "w-abc-t0-g0": "w-abc-0",
        "w-abc-t0-g1": "w-abc-0",
        "w-abc-t1-g0": "w-abc-1",
        "w-abc-t1-g1": "w-abc-1",
    }
    assert [p.index_in_topic for p in t.producers if p.topic == "w-abc-1"] == [0, 1, 2]
    placement = place(t, 3)  # 6 producers and 16 consumers: a worker for the producers, two for the consumers
    placed = clients_by_worker(t, placement, 3)
    assert [tuple(map(len, clients)) for clients in placed] == [(6, 0), (0, 8), (0, 8)]
    assert {c.group for c in placed[1][1]} == set(t.groups)  # dealt in turn: every group
    for workers in (3, 5):  # each client on the worker its placement names, in the topology's order
        spread = place(t, workers)
        for w, (producers, consumers) in enumerate(clients_by_worker(t, spread, workers)):
            assert producers == [p for p in t.producers if spread[f"p{p.producer_id}"] == w]
            assert consumers == [c for c in t.consumers if spread[f"c{c.consumer_id}"] == w]


def test_producers_and_consumers_get_workers_of_their_own_in_proportion_at_least_one_each():
    split = split_roles(range(4), 2, 300)
    assert (list(split[0]), list(split[1])) == ([0], [1, 2, 3])
    split = split_roles(range(4), 300, 2)
    assert (list(split[0]), list(split[1])) == ([0, 1, 2], [3])
    assert split_roles([5], 2, 3) == ([5], [5])  # one worker hosts both
    assert split_roles([0, 1], 0, 3) == ([0, 1], [0, 1])  # one role: every worker


def test_a_new_client_goes_on_the_least_loaded_live_worker_of_its_role_or_any_when_none_is_left():
    placement = {"p0": 0, "c0": 1, "c1": 1, "c2": 2}
    producer, consumer = ProducerSpec(1, "t", 1), ConsumerSpec(3, "t", "g", "SHARE_GROUP")
    assert least_loaded(placement, [0, 1, 2], producer) == 0
    assert least_loaded(placement, [0, 1, 2], consumer) == 2
    assert least_loaded(placement, [0], consumer) == 0  # the consumers' workers are gone
    assert least_loaded({"c0": 0, "c1": 0, "c2": 1}, [0, 1], producer) == 1  # no producer's worker: the least loaded


def test_resize_adds_with_fresh_ids_and_removes_newest_first():
    t = build_topology(workload(producersPerTopic=2, consumersPerGroup=3), "x")
    added_p, added_c, removed = resize(t, 3, 5, "SHARE_GROUP")
    assert [p.producer_id for p in added_p] == [2] and [c.consumer_id for c in added_c] == [3, 4]
    assert removed == []
    added_p, added_c, removed = resize(t, 1, 2, "SHARE_GROUP")
    assert not added_p and not added_c and removed == ["p1", "p2", "c2", "c3", "c4"]
    assert [p.producer_id for p in t.producers] == [0] and [c.consumer_id for c in t.consumers] == [0, 1]
    added_p, _, _ = resize(t, 2, 2, "SHARE_GROUP")
    assert added_p[0].producer_id == 3  # ids are never reused: sequence tracking stays per producer


def test_flatten_keeps_kafka_property_names_whole():
    flat = flatten(workload(kafkaConfig={"producerConfig": {"batch.size": 1}}).to_yaml_dict())
    assert flat["kafkaConfig.producerConfig.batch.size"] == 1
    assert flat["acknowledgement.mode"] == "IMPLICIT"


def test_live_changes_classify_and_refuse():
    old = workload(partitionsPerTopic=3).to_yaml_dict()
    new = workload(partitionsPerTopic=4, producerRate=5, kafkaConfig={"producerConfig": {"linger.ms": 9}})
    changes = {c.key: c.effect for c in live_changes(old, new.to_yaml_dict())}
    assert changes == {
        "partitionsPerTopic": "partitions",
        "producerRate": "rate",
        "kafkaConfig.producerConfig.linger.ms": "producers",
    }
    with pytest.raises(ValueError, match="can only grow"):
        live_changes(old, workload(partitionsPerTopic=2).to_yaml_dict())
    with pytest.raises(ValueError, match="'consumerType' cannot change"):
        live_changes(old, workload(partitionsPerTopic=3, consumerType="CONSUMER_GROUP").to_yaml_dict())
    assert live_changes(old, old) == []


@pytest.mark.parametrize(
    ("text", "status", "expected"),
    [
        ("backlog<1000", {"backlog": 999}, True),
        ("backlog<1000", {"backlog": 1000}, False),
        ("consRate>=0.95*pubRate", {"consRate": 95, "pubRate": 100}, True),
        ("consRate>=0.95*pubRate and e2eP99Ms<50", {"consRate": 95, "pubRate": 100, "e2eP99Ms": None}, False),
        ("not backlog>5 or sent==0", {"backlog": 9, "sent": 0}, True),
        ("1<backlog<=3", {"backlog": 3}, True),
        # the thresholds' grammar and figure names, each figure read from the status as it is now
        ("consumed.rate >= 0.95 * produced.rate", {"consRate": 95, "pubRate": 100}, True),
        ("consumed.rate >= 0.95 * produced.rate", {"consRate": 94, "pubRate": 100}, False),
        ("e2e.p99 < 0.05s and received >= 2500", {"e2eP99Ms": 49.0, "received": 2500}, True),
        ("e2e.p99 < 50ms and received >= 2500", {"e2eP99Ms": 50.0, "received": 2500}, False),
        ("e2e.p99 < 50ms", {"e2eP99Ms": None}, False),  # no latency measured yet
        ("lock_timeouts == 0 and dead_lettered >= 40", {"lockTimeouts": 0, "dead_lettered": 40}, True),
        ("backlog.end < 1000", {"backlog": 999}, True),
        ("produced.rate > 1000 msg/s", {"pubRate": 1200.0}, True),
    ],
)
def test_conditions(text, status, expected):
    assert holds(parse_condition(text), status) is expected


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("__import__('os')", "only numbers, status fields"),
        ("lag<1", "unknown field 'lag'"),
        ("backlog<'a'", "only numbers, status fields"),
        ("backlog<", "not a condition such as 'backlog<1000'"),
        # dotted: the thresholds' grammar, refused as a threshold would be, or a figure no snapshot has
        ("backlog.real<1", "no figure 'backlog.real'"),
        ("e2e.p99 < 50", "e2e.p99 is a latency"),
        ("brokerLag.max < 10", "'brokerLag.max' has no value while a run goes; figures a wait can read:"),
        ("measured.seconds > 10s", "'measured.seconds' has no value while a run goes"),
    ],
)
def test_a_condition_is_refused_in_one_line_in_the_grammar_it_is_written_in(text, line):
    with pytest.raises(DimsterError) as refused:
        parse_condition(text)
    assert str(refused.value).startswith(f"--until '{text}': ") and line in str(refused.value)


def report(worker, end, sent, target, received=0):
    producer = ClientInterval("p0", "producer", "t", target_rate=target, sent=sent, acked=sent, next_sequence=sent)
    consumer = ClientInterval("c0", "share_consumer", "t", group="g", received=received)
    return worker_report(worker, end, [producer, consumer])


def test_pacing_window_uses_the_time_reports_cover():
    aggregate = RunAggregate({"g": "t"})
    aggregate.load_started = 100.0
    for second in range(1, 11):
        aggregate.add(report(0, 100.0 + second, sent=990, target=1000, received=900))
    rates = aggregate.recent_rates()
    assert rates["pubRate"] == pytest.approx(990) and rates["targetRate"] == pytest.approx(1000)
    assert rates["consRate"] == pytest.approx(900)
    aggregate.restart_rates()
    assert aggregate.recent_rates()["pubRate"] == 0


def test_recent_rates_summed_as_reports_come_agree_with_a_sum_over_every_report():
    """RecentRates keeps running sums per worker; the same figures as summing every report of each
    worker's last 5 or 10 s (counted back from its own latest), a worker silent for over 10 s left out."""
    rng = random.Random(7)
    recent = RecentRates((5.0, 10.0))
    rows: list[tuple[int, float, float, int, float, int]] = []
    ends = dict.fromkeys(range(6), 100.0)
    for step in range(400):
        worker = rng.randrange(6 if step < 200 else 4)  # workers 4 and 5 stop reporting half way
        covered = rng.uniform(0.5, 1.5)
        ends[worker] += covered
        row = (worker, ends[worker], covered, rng.randrange(2000), rng.choice([500.0, 1000.0]), rng.randrange(2000))
        rows.append(row)
        recent.add(*row, since=row[1] - covered)
        newest = max(end for _, end, *_ in rows)
        for seconds in (5.0, 10.0):
            sums: dict[int, list[float]] = {}
            for w in {r[0] for r in rows}:
                latest = max(r[1] for r in rows if r[0] == w)
                if latest < newest - 10.0:
                    continue
                mine = [r for r in rows if r[0] == w and r[1] >= latest - seconds]
                sums[w] = [sum(r[2] for r in mine), sum(r[3] for r in mine), sum(r[4] * r[2] for r in mine),
                           sum(r[5] for r in mine)]  # fmt: skip
            expected = {
                "pubRate": sum(s[1] / s[0] for s in sums.values()),
                "targetRate": sum(s[2] / s[0] for s in sums.values()),
                "consRate": sum(s[3] / s[0] for s in sums.values()),
            }
            assert recent.rates(seconds) == pytest.approx(expected, rel=1e-9)
    assert sums and not {4, 5} & set(sums)  # the two silent workers dropped out
    for _ in range(12):  # every worker's producers stop: the rates read 0, nothing left over
        for worker in range(4):
            ends[worker] += 1.0
            recent.add(worker, ends[worker], 1.0, 0, 0.0, 0, since=ends[worker] - 1.0)
    assert recent.rates(5.0) == recent.rates(10.0) == {"pubRate": 0.0, "targetRate": 0.0, "consRate": 0.0}


def test_secrets_are_redacted():
    config = {"sasl.jaas.config": "x", "ssl.key.password": "y", "nested": {"sasl.password": "z"}, "acks": "all"}
    assert redact(config) == {
        "sasl.jaas.config": "***",
        "ssl.key.password": "***",
        "nested": {"sasl.password": "***"},
        "acks": "all",
    }
    assert redact_argv(["--set", "kafkaConfig.commonConfig.sasl.password=hunter2"]) == [
        "--set",
        "kafkaConfig.commonConfig.sasl.password=***",
    ]


def test_client_library_changes_rebuild_the_clients_of_its_role():
    old = workload().to_yaml_dict()
    new = workload(clientLibrary={"producer": "java", "shareConsumer": "java"}).to_yaml_dict()
    changes = {c.key: (c.old, c.new, c.effect) for c in live_changes(old, new)}
    assert changes == {
        "clientLibrary.producer": ("librdkafka", "java", "producers"),
        "clientLibrary.shareConsumer": ("librdkafka", "java", "consumers"),
    }


def test_status_window_shows_records_per_poll():
    aggregate = RunAggregate({"g": "t"})
    clients = [
        ClientInterval("c0", "share_consumer", "t", "g", received=30, polls=3, max_poll_records=12),
        ClientInterval("c1", "share_consumer", "t", "g", received=10, polls=2, max_poll_records=7),
    ]
    aggregate.add(worker_report(0, 1.0, clients))
    window = aggregate.take_window()
    assert (window["recordsPerPoll"], window["maxPollRecords"]) == (8.0, 12)
    assert aggregate.take_window()["recordsPerPoll"] is None  # no polls in the next window


def test_batch_sizes_leave_out_producers_that_stopped_reporting():
    aggregate = RunAggregate({})

    def producer(client_id: str, records: float) -> ClientInterval:
        stats = {"batch_records_avg": records, "batch_bytes_avg": records * 500}
        return ClientInterval(client_id, "producer", "t", client_stats=stats)

    aggregate.add(worker_report(0, 100.0, [producer("p0", 2.0), producer("p1", 2.0)]))
    aggregate.add(worker_report(0, 105.0, [producer("p0", 40.0)]))
    assert producer_batches(aggregate.producer_stats)["batchRecordsAvg"] == 21.0  # p1's last word is recent
    aggregate.add(worker_report(0, 111.0, [producer("p0", 60.0)]))
    assert producer_batches(aggregate.producer_stats)["batchRecordsAvg"] == 60.0  # p1 was removed 11 s ago
