"""The wire protocol: every message survives encode/decode unchanged, in msgpack, not pickle."""

import pickle
from dataclasses import replace

import msgspec
import numpy as np
import pytest

from dimster.worker.accounts import GroupAccount
from dimster.worker.client_columns import COUNTS, REALS, ClientColumns
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import (
    MESSAGES,
    AddClients,
    Assign,
    Assignment,
    ClientInterval,
    ClockProbed,
    Close,
    Closed,
    ConsumerSpec,
    CrashConsumers,
    Failed,
    Hello,
    LogFileSent,
    ProbeClock,
    ProducerSpec,
    ProducersStopped,
    Progress,
    ProtocolError,
    Ready,
    Refused,
    RemoveClients,
    Reported,
    RestartConsumers,
    SetClock,
    StartLoad,
    StopProducers,
    Update,
    WatchRedeliveries,
    Welcome,
    decode,
    encode,
    kind_of,
    report_bytes,
    worker_report,
)
from dimster.worker.wire import to_wire

pytestmark = pytest.mark.unit

WORKLOAD = {"name": "w", "producerRate": 100.5, "kafkaConfig": {"producerConfig": {"linger.ms": 5}}}
ASSIGNMENT = Assignment(
    worker_index=2,
    bootstrap_servers="10.1.0.1:9092",
    workload=WORKLOAD,
    producers=[ProducerSpec(0, "t", 0), ProducerSpec(3, "t", 1)],
    consumers=[ConsumerSpec(7, "t", "g", "SHARE_GROUP")],
    total_producers=4,
    delivery_count_limit=5,
    log_file="",
    kafka_version="4.3.1",
    clock_offset=-0.25,
)
INTERVAL = ClientInterval(
    "c7",
    "share_consumer",
    "t",
    "g",
    library="java",
    generation=2,
    received=10,
    delivery_counts={1: 9, 2: 1},
    settled={0: [(0, 4), (6, 9)], 3: [(0, 0)]},
    client_stats={"batch_records_avg": 12.5},
    failed_sequences=[5],
    rebalances=[(1_790_000_000.25, "revoked", 3), (1_790_000_000.5, "assigned", 2)],
)
LATENCIES = {("e2e", 3): ({0: 1, 17: 4}, 5, 0.5, 900.0), ("warmup_e2e", 0): ({2: 1}, 1, 2.0, 2.0)}
PUBLISH = {("publish", -1): ({40: 2, 41: 1}, 3, 1.0, 1.5)}
EXAMPLES = [
    Hello("0.1.0", 1, "run-1", "coordinator-host"),
    Hello("0.1.0", 1, "", "h", status_only=True),
    Assign(ASSIGNMENT),
    StartLoad(1_790_000_000.125),
    Update(WORKLOAD, 4),
    AddClients([ProducerSpec(9, "t", 2)], [ConsumerSpec(11, "t", "g", "CONSUMER_GROUP")]),
    RemoveClients(["p9", "c11"]),
    StopProducers(),
    CrashConsumers(["c0", "c2"]),
    RestartConsumers(["c1"]),
    WatchRedeliveries("g", 1_800_000_000.5, {1: [(0, 4), (9, 9)]}),
    Close(),
    ProbeClock(1_790_000_000.5),
    SetClock(0.3001),
    Welcome("0.1.0", 1, "agent-a", 16, 64 * 2**30, busy_with="run-0 from h"),
    Refused("busy with run run-0 from h"),
    Ready(),
    Reported(
        worker_report(
            2,
            1_790_000_001.0,
            [INTERVAL, ClientInterval("p0", "producer", "t", next_sequence=99)],
            cpu_seconds=0.75,
            histograms=HistogramColumns.gather([LATENCIES, PUBLISH]),
        )
    ),
    ProducersStopped(),
    LogFileSent("worker-2.log", b"line\n\x00\xff"),
    Closed(),
    Failed("worker 2: boom"),
    ClockProbed(1_790_000_000.5, 1_790_000_000.81),
    Progress(1_790_000_000.25, 12_000, 11_990, 2000.0, 3),
]


def test_every_message_kind_has_an_example():
    assert {type(m).__name__ for m in EXAMPLES} == set(MESSAGES)


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(message):
    data = encode(message)
    assert decode(data) == message
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(data)


def test_histogram_keys_and_int_keyed_maps_keep_their_types():
    report = worker_report(0, 1.0, [INTERVAL], histograms=HistogramColumns.gather([LATENCIES]))
    back = decode(encode(Reported(report))).report
    assert [(c, (m, p), w) for c, m, p, w in back.histograms.wires()] == [(0, k, w) for k, w in LATENCIES.items()]
    assert back.groups["g"].settled[3] == [(0, 0)] and back.clients[0].delivery_counts == {1: 9, 2: 1}


def test_a_reports_histograms_are_columns_and_each_metrics_merge_in_one_sum():
    """Protocol 16: a report's histograms travel as packed columns; merging those of some metrics adds
    their buckets, totals and extremes, whichever client they came from."""

    other = {("e2e", 0): ({17: 6, 30: 1}, 7, 0.25, 2000.0), ("publish", -1): ({1: 1}, 1, 1.0, 1.0)}
    report = worker_report(0, 1.0, [INTERVAL, INTERVAL], histograms=HistogramColumns.gather([LATENCIES, other]))
    data = encode(Reported(report))
    wire = msgspec.msgpack.decode(data)[1]["report"]["histograms"]
    assert wire["bucket"] == b"".join(b.to_bytes(8, "little", signed=True) for b in (0, 17, 2, 17, 30, 1))
    back = decode(data).report.histograms
    assert back.client.tolist() == [0, 0, 1, 1] and back.metric == ["e2e", "warmup_e2e", "e2e", "publish"]
    assert back.by_metric == {
        "e2e": ({0: 1, 17: 10, 30: 1}, 12, 0.25, 2000.0),
        "warmup_e2e": ({2: 1}, 1, 2.0, 2.0),
        "publish": ({1: 1}, 1, 1.0, 1.0),
    }


@pytest.mark.parametrize(
    "change",
    [
        {"size": b"\x03" + b"\x00" * 7},
        {"client": (5).to_bytes(8, "little")},
        {"count": b""},
        {"metric": []},
        {"bucket": (1 << 40).to_bytes(8, "little")},
        {"bucket": (-(1 << 63)).to_bytes(8, "little", signed=True)},  # its abs() is itself: negative
    ],
    ids=["sizes", "client beyond", "counts", "metrics", "bucket beyond", "bucket at int64's least"],
)
def test_histogram_columns_that_disagree_are_protocol_errors(change):
    import msgpack

    report = worker_report(
        0, 1.0, [INTERVAL], histograms=HistogramColumns.gather([{("e2e", 3): ({0: 1}, 1, 1.0, 1.0)}])
    )
    kind, body = msgspec.msgpack.decode(encode(Reported(report)))
    body["report"]["histograms"].update(change)
    with pytest.raises(ProtocolError):
        decode(msgpack.packb([kind, body], use_bin_type=True))


def test_garbage_and_unknown_kinds_are_protocol_errors():
    with pytest.raises(ProtocolError):
        decode(b"\x93not msgpack at all")
    with pytest.raises(ProtocolError):
        decode(pickle.dumps(Close()))
    import msgpack

    with pytest.raises(ProtocolError):
        decode(msgpack.packb(["Explode", {}]))
    with pytest.raises(ProtocolError):
        decode(msgpack.packb(["StartLoad", {"at": "soon"}]))
    with pytest.raises(ProtocolError):  # None only where a field is optional
        decode(msgpack.packb(["StartLoad", {"at": None}]))
    deep = b"\x92\xa6Update\x82\xa8workload" + b"\x81\xa1k" * 200_000 + b"\xc0" + b"\xaftotal_producers\x01"
    with pytest.raises(ProtocolError):  # nested beyond any message of ours
        decode(deep)
    with pytest.raises(ProtocolError):  # pairs where an int-keyed map belongs
        decode(msgpack.packb(["WatchRedeliveries", {"group": "g", "crashed_at": 1.0, "held": [[1, b"\0" * 16]]}]))
    with pytest.raises(ProtocolError):
        encode(("report", 1))


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_the_kind_of_an_encoded_message_is_read_without_its_body(message):
    """What an agent relays as it came: its kind, for `Closed`, which ships the worker's logs first."""
    assert kind_of(encode(message)) == type(message).__name__


def test_bytes_that_are_no_message_have_no_kind():
    import msgpack

    for data in (b"", b"\x93not msgpack", msgpack.packb(["Explode", {}]), msgpack.packb([1, {}]),
                 msgpack.packb(["Closed", {}, 3]), msgpack.packb({"Closed": {}})):  # fmt: skip
        with pytest.raises(ProtocolError):
            kind_of(data)


def test_a_reports_clients_travel_as_columns_with_details_only_where_there_are_any():
    """Protocol 18: a name column per name, the counters packed a row per client (COUNTS' and
    REALS' order), a client's details only when it has any, and only those of them that it has."""

    idle = ClientInterval("c1", "share_consumer", "t", "g")
    producer = ClientInterval("p0", "producer", "t", sent=3, target_rate=2.5, failed_sequences=[7])
    _kind, body = msgspec.msgpack.decode(encode(Reported(worker_report(0, 1.0, [idle, producer]))))
    wire = body["report"]["clients"]
    assert wire["client_id"] == ["c1", "p0"] and wire["group"] == ["g", ""]
    counts = np.frombuffer(wire["counts"], "<i8").reshape(2, len(COUNTS))
    assert counts[0].tolist() == [0] * len(COUNTS) and counts[1][COUNTS.index("sent")] == 3
    assert np.frombuffer(wire["reals"], "<f8").reshape(2, len(REALS))[1][REALS.index("target_rate")] == 2.5
    assert wire["details"] == {1: {"failed_sequences": [7]}}
    assert decode(encode(Reported(worker_report(0, 1.0, [idle, producer])))).report.clients == [idle, producer]
    busy = decode(encode(Reported(worker_report(0, 1.0, [INTERVAL])))).report
    assert busy.clients[0] == replace(INTERVAL, settled={}) and busy.clients[0].crash_held == {}
    assert busy.groups == {"g": GroupAccount(settled=INTERVAL.settled, received=10)}  # its ranges, in its group


def test_ranges_and_histogram_counts_travel_packed_and_come_back_exactly():
    """A report's bulk, its sequence ranges and bucket counts, is one bin of int64 pairs each, read
    back in one call (protocol 14), 64-bit values and negative buckets included."""

    ranges = [(0, 4), (7, 7), (2**40, 2**62)]
    counts = {-3: 1, 0: 2, 1100: 2**33}
    client = ClientInterval(
        "c1", "share_consumer", "t", "g", settled={5: ranges}, settled_rejected={(5, 2): [(9, 12)]}
    )  # fmt: skip
    latencies = HistogramColumns.gather([{("e2e", 2): (counts, 7, 1.5, 9.0)}])
    data = encode(Reported(worker_report(0, 1.0, [client], histograms=latencies)))
    _kind, body = msgspec.msgpack.decode(data)
    assert "details" not in body["report"]["clients"]  # a consumer's ranges travel in its group (protocol 19)
    wire = body["report"]["groups"]["g"]
    assert wire["settled"] == {5: b"".join(n.to_bytes(8, "little", signed=True) for r in ranges for n in r)}
    assert wire["settled_rejected"] == {(5, 2): b"".join(n.to_bytes(8, "little") for n in (9, 12))}  # a map, since 17
    assert isinstance(body["report"]["histograms"]["count"], bytes) and len(body["report"]["histograms"]["count"]) == 24
    back = decode(data).report
    assert back.clients[0] == ClientInterval("c1", "share_consumer", "t", "g")
    assert back.groups["g"].settled[5] == ranges and type(back.groups["g"].settled[5][0]) is tuple
    assert back.groups["g"].settled_rejected == {(5, 2): [(9, 12)]}
    assert list(back.histograms.wires()) == [(0, "e2e", 2, (counts, 7, 1.5, 9.0))]
    assert back.histograms.by_metric == {"e2e": (counts, 7, 1.5, 9.0)}  # negative buckets and 2**33 counts too


@pytest.mark.parametrize(
    "packed", [b"\x00" * 15, b"\x00" * 24, "0123456789abcdef", [[0, 4]]], ids=["15 bytes", "24 bytes", "str", "pairs"]
)
def test_packed_ranges_that_are_not_whole_int64_pairs_are_protocol_errors(packed):
    import msgpack

    clients = to_wire(ClientColumns, ClientColumns.gather([ClientInterval("c1", "share_consumer", "t", "g")]))
    report = {"worker_index": 0, "end_time": 1.0, "clients": clients | {"details": {0: {"settled": {5: packed}}}}}
    with pytest.raises(ProtocolError):
        decode(msgpack.packb(["Reported", {"report": report}], use_bin_type=True))


def test_a_reports_received_bytes_are_the_receivers_own_never_on_the_wire():
    """decode keeps the bytes a report came in (the journal writes them as they are); they never
    travel, and a message that carries them is no message of the protocol."""
    import msgpack

    report = worker_report(3, 1.0, [ClientInterval("p0", "producer", "t", sent=4)])
    data = encode(Reported(report))
    assert encode(Reported(report, received=b"elsewhere")) == data
    back = decode(data)
    assert isinstance(back, Reported) and back.received == data and back.report == report
    assert report_bytes(data) == msgpack.packb(msgpack.unpackb(data)[1]["report"])
    assert report_bytes(b"") is None and report_bytes(encode(Close())) is None
    with pytest.raises(ProtocolError):
        decode(msgpack.packb(["Reported", {"report": msgpack.unpackb(data)[1]["report"], "received": b"x"}]))


def test_histograms_merged_by_metric_and_by_owner_are_those_merged_one_by_one():
    """by_metric and of_owners (one count over every bucket, numpy) against each client's histogram
    added in turn: 200 random reports, metrics in any order, empty histograms, negative buckets."""
    rng = np.random.default_rng(48)
    for _ in range(200):
        clients = int(rng.integers(1, 12))
        histograms = []
        for _client in range(clients):
            own = {}
            for metric in rng.choice(["e2e", "publish", "publish_delay"], size=int(rng.integers(0, 4))):
                buckets = {
                    int(b): int(rng.integers(1, 1 << 34)) for b in rng.integers(-40, 60, size=rng.integers(0, 6))
                }
                low, high = sorted(float(v) for v in rng.uniform(0, 1e4, 2))
                own[(str(metric), int(rng.integers(-1, 3)))] = (buckets, sum(buckets.values()), low, high)
            histograms.append(own)
        columns = HistogramColumns.gather(histograms)
        owner = rng.integers(0, 3, size=clients)
        expected_by_metric: dict = {}
        expected_by_owner: dict = {}
        for client, metric, _, (buckets, total, low, high) in columns.wires():
            for into, key in (
                (expected_by_metric, metric),
                (expected_by_owner.setdefault(metric, {}), int(owner[client])),
            ):
                was = into.get(key, ({}, 0, np.inf, -np.inf))
                merged = dict(was[0])
                for bucket, count in buckets.items():
                    merged[bucket] = merged.get(bucket, 0) + count
                into[key] = (merged, was[1] + total, min(was[2], low), max(was[3], high))
        assert columns.by_metric == expected_by_metric
        for metric in ("e2e", "publish", "publish_delay"):
            assert columns.of_owners(metric, owner) == expected_by_owner.get(metric, {})
