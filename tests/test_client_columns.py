"""A report's clients as columns (protocol 18): what a worker gathers is what the coordinator reads,
one by one and column by column, and what the metrics writer writes a row per client."""

import struct

import msgpack
import pyarrow.parquet as pq
import pytest

from dimster.coordinator.account.intake import note_crashes
from dimster.metrics.schema import CLIENT_COLUMNS, INTERVAL_COLUMNS
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.client_columns import COUNTS, ClientColumns, ClientInterval
from dimster.worker.protocol import (
    ProtocolError,
    Reported,
    WatchRedeliveries,
    decode,
    encode,
    worker_report,
)
from dimster.worker.wire import to_wire

pytestmark = pytest.mark.unit

PRODUCER = ClientInterval(
    "p3", "producer", "t", library="java", generation=2, target_rate=12.5, sent=40, sent_bytes=4096, acked=39,
    send_errors=1, next_sequence=41, failed_sequences=[17], client_stats={"batch_records_avg": 4.0},
)  # fmt: skip
CONSUMER = ClientInterval(
    "c8", "share_consumer", "t", "g", "librdkafka", 1, received=30, received_bytes=3000, accepted=28, rejected=2,
    polls=5, max_poll_records=8, renewed=3, first_received_at=100.25, last_received_at=100.75,
    delivery_counts={1: 28, 2: 2}, settled={3: [(0, 29)]}, settled_rejected={(3, 1): [(4, 5)]},
)  # fmt: skip
IDLE = ClientInterval("c9", "share_consumer", "t", "g", "librdkafka", 1)


def test_the_columns_come_back_as_the_intervals_they_were_gathered_from():
    sent = ClientColumns.gather([PRODUCER, IDLE, CONSUMER])
    back = decode(encode(Reported(worker_report(4, 101.0, sent)))).report.clients
    assert list(back) == [PRODUCER, IDLE, CONSUMER]
    assert sorted(back.details) == [0, 2]  # the idle consumer has none
    assert back.deliveries.tolist() == [2, 1, 28, 2, 2, 2]  # (client, delivery count, records), outside details
    assert back.count("received").tolist() == [0, 0, 30] and back.count("next_sequence").tolist() == [41, 0, 0]
    assert back.detail(1).settled == {} and back.detail(2).settled_rejected == {(3, 1): [(4, 5)]}


@pytest.mark.parametrize(
    "broken",
    [
        {"role": ["producer"]},  # names of two clients, a role of one
        {"counts": b"\x00" * 8},  # fewer counters than two clients have
        {"details": {2: {"failed_sequences": [1]}}},  # a client beyond the report's two
        {"deliveries": struct.pack("<3q", 2, 1, 5)},  # delivery counts of a client beyond the report's two
        {"deliveries": struct.pack("<2q", 1, 1)},  # not whole (client, delivery count, records) triples
    ],
    ids=["names", "counts", "details", "deliveries of no client", "deliveries not triples"],
)
def test_columns_that_disagree_are_protocol_errors(broken):
    clients = to_wire(ClientColumns, ClientColumns.gather([PRODUCER, CONSUMER])) | broken
    report = {"worker_index": 0, "end_time": 1.0, "clients": clients}
    with pytest.raises(ProtocolError):
        decode(msgpack.packb(["Reported", {"report": report}], use_bin_type=True))


def test_the_metrics_writer_writes_a_row_per_client_with_its_own_values(tmp_path):
    """Two reports' clients, joined column by column at the flush: each row holds its client's names
    and counters, its report's columns, and a delivery count's or statistics' row names its client."""
    writer = MetricsWriter(tmp_path, 100.0)
    writer.add(worker_report(4, 101.0, [PRODUCER, IDLE]), "warmup")
    writer.add(worker_report(5, 102.0, [CONSUMER]), "measure")
    writer.flush()
    rows = pq.read_table(tmp_path / "intervals").to_pylist()
    assert [(r["worker"], r["phase"], r["end_time"], r["run_time_s"]) for r in rows] == [
        (4, "warmup", 101.0, 1.0), (4, "warmup", 101.0, 1.0), (5, "measure", 102.0, 2.0),
    ]  # fmt: skip
    for row, client in zip(rows, (PRODUCER, IDLE, CONSUMER), strict=True):
        assert {c: row[c] for c in (*CLIENT_COLUMNS, *INTERVAL_COLUMNS)} == {
            c: getattr(client, c) for c in (*CLIENT_COLUMNS, *INTERVAL_COLUMNS)
        }
    assert set(COUNTS) >= {c for c in INTERVAL_COLUMNS if c not in ("library", "target_rate")}
    deliveries = pq.read_table(tmp_path / "delivery_counts").to_pylist()
    assert [(r["client_id"], r["worker"], r["delivery_count"], r["count"]) for r in deliveries] == [
        ("c8", 5, 1, 28), ("c8", 5, 2, 2),
    ]  # fmt: skip
    [stats] = pq.read_table(tmp_path / "client_stats").to_pylist()
    assert (stats["client_id"], stats["worker"], stats["batch_records_avg"]) == ("p3", 4, 4.0)


def test_a_crashed_consumer_is_told_and_its_held_records_sent_to_the_groups_consumers():
    """Read from the columns (its crash time) and its details (what it held), the others untouched."""
    told, sent = [], []

    class Log:
        def tell(self, kind, line, **fields):
            told.append((kind, fields))

    class Ensemble:
        def send_all(self, message):
            sent.append(message)

    crashed = ClientInterval("c7", "share_consumer", "t", "g", crashed_at=1234.5, crash_held={3: [(10, 14), (20, 20)]})
    note_crashes(worker_report(1, 1235.0, [CONSUMER, crashed, IDLE]), Ensemble(), Log())
    assert told == [("consumer_crashed", {"client": "c7", "group": "g", "at": 1234.5, "held": 6})]
    assert sent == [WatchRedeliveries("g", 1234.5, {3: [(10, 14), (20, 20)]})]
