"""The files that hold a metrics table: a run's parts merged into one after its end, in order, with
nothing counted twice when a crash cut the merge short; tables that cannot be merged stay as they were."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dimster.coordinator.recover import write_tail
from dimster.results.metrics_parts import compact_parts, readable_parts, written_flushes
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.protocol import ClientInterval, IntervalReport

pytestmark = pytest.mark.unit
START = 100.0


def write_flushes(metrics, count: int) -> MetricsWriter:
    """`count` flushes of one report each, the producer's `sent` counting the flush."""
    writer = MetricsWriter(metrics, START)
    for flush in range(count):
        publish = {("publish", -1): ({3: 1}, 1, 1.0, 1.0)}
        client = ClientInterval("p0", "producer", "t", sent=flush + 1, histograms=publish)
        writer.add(IntervalReport(0, START + flush + 1, [client]), "measure")
        writer.flush()
    return writer


def sent(table_dir) -> list[int]:
    return [n for path in readable_parts(table_dir)[0] for n in pq.read_table(path).column("sent").to_pylist()]


def test_a_runs_parts_merge_into_one_file_a_table_in_order(tmp_path):
    metrics = tmp_path / "metrics"
    write_flushes(metrics, 4)
    schema = pq.read_schema(metrics / "intervals" / "part-00000.parquet")
    assert compact_parts(metrics) == []
    for table in ("intervals", "histograms", "workers"):
        assert [p.name for p in (metrics / table).iterdir()] == ["parts-00000-00003.parquet"]
    assert sent(metrics / "intervals") == [1, 2, 3, 4]
    assert pq.read_schema(metrics / "intervals" / "parts-00000-00003.parquet") == schema
    assert written_flushes(metrics / "workers") == {0, 1, 2, 3}
    assert compact_parts(metrics) == []  # once merged, nothing more to do
    assert [p.name for p in (metrics / "intervals").iterdir()] == ["parts-00000-00003.parquet"]


def test_a_merge_cut_short_by_a_crash_counts_nothing_twice(tmp_path):
    metrics = tmp_path / "metrics"
    write_flushes(metrics, 3)
    kept = {p.name: p.read_bytes() for p in (metrics / "intervals").iterdir()}
    compact_parts(metrics)
    for name, data in list(kept.items())[:2]:  # the merged file written, two parts not yet removed
        (metrics / "intervals" / name).write_bytes(data)
    (metrics / "intervals" / ".parts-00000-00009.parquet.writing").write_bytes(b"half")  # a merge cut short
    assert sent(metrics / "intervals") == [1, 2, 3]
    # and a later merge (a crashed run's tail written after it) holds the earlier one, which is then skipped
    (metrics / "intervals" / "part-00003.parquet").write_bytes(kept["part-00002.parquet"])
    compact_parts(metrics)
    assert sorted(p.name for p in (metrics / "intervals").glob("*.parquet")) == ["parts-00000-00003.parquet"]
    assert sent(metrics / "intervals") == [1, 2, 3, 3]


def test_a_crashed_runs_tail_is_written_after_the_flushes_a_merged_file_holds(tmp_path):
    from dimster.coordinator.journal import RunJournal

    metrics = tmp_path / "metrics"
    writer = write_flushes(metrics, 2)
    compact_parts(metrics)
    journal = RunJournal(tmp_path)
    journal.start(["t"], 1, {})
    for flush in range(3):  # the journal holds every report with the flush it went to; the third never did
        client = ClientInterval("p0", "producer", "t", sent=flush + 1)
        journal.report(IntervalReport(0, START + flush + 1, [client]), "measure", flush)
    journal.close()
    assert writer.parts == 2
    assert write_tail(journal.tail_path, metrics, START) == 1
    assert sent(metrics / "intervals") == [1, 2, 3]


def test_a_table_that_cannot_be_merged_stays_as_it_was_with_a_note(tmp_path):
    metrics = tmp_path / "metrics"
    write_flushes(metrics, 3)
    cut = metrics / "intervals" / "part-00001.parquet"
    cut.write_bytes(cut.read_bytes()[:-20])  # its footer gone
    mixed = metrics / "client_stats"
    mixed.mkdir()
    pq.write_table(pa.table({"a": [1.0]}), mixed / "part-00000.parquet")
    pq.write_table(pa.table({"a": ["words"]}), mixed / "part-00001.parquet")
    notes = compact_parts(metrics)
    assert [note.split(":")[0] for note in notes] == [
        "metrics/client_stats kept in 2 files",
        "metrics/intervals kept in 3 files",
    ]
    assert sorted(p.name for p in (metrics / "intervals").iterdir()) == [f"part-0000{n}.parquet" for n in range(3)]
    assert sent(metrics / "intervals") == [1, 3]  # the part cut short is left out with its note, as before
    assert [p.name for p in (metrics / "histograms").iterdir()] == ["parts-00000-00002.parquet"]
    assert not list(metrics.rglob(".*.writing"))
