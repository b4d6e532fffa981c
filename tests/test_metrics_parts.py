"""The files that hold a metrics table: a run's parts merged into one after its end, in order, with
nothing counted twice when a crash cut the merge short; tables that cannot be merged stay as they were."""

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dimster.results import metrics_parts
from dimster.results.metrics_parts import compact_parts, completed_ranges, readable_parts, table_files, written_flushes
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ClientInterval, worker_report

pytestmark = pytest.mark.unit
START = 100.0


def write_flushes(metrics, count: int, behind: bool = False) -> MetricsWriter:
    """`count` flushes of one report each, the producer's `sent` counting the flush."""
    writer = MetricsWriter(metrics, START, behind)
    for flush in range(count):
        publish = HistogramColumns.gather([{("publish", -1): ({3: 1}, 1, 1.0, 1.0)}])
        client = ClientInterval("p0", "producer", "t", sent=flush + 1)
        writer.add(worker_report(0, START + flush + 1, [client], histograms=publish), "measure")
        writer.flush()
    return writer


def sent(table_dir) -> list[int]:
    return [n for path in readable_parts(table_dir)[0] for n in pq.read_table(path).column("sent").to_pylist()]


def test_a_runs_parts_merge_into_one_file_a_table_in_order(tmp_path):
    metrics = tmp_path / "metrics"
    write_flushes(metrics, 4)
    schema = pq.read_schema(metrics / "intervals" / "part-00000.parquet")
    part = pq.read_metadata(metrics / "intervals" / "part-00000.parquet").row_group(0)
    encodings = {part.column(i).path_in_schema: part.column(i).encodings for i in range(part.num_columns)}
    assert "DELTA_BINARY_PACKED" in encodings["sent"] and "RLE_DICTIONARY" in encodings["client_id"]
    assert "RLE_DICTIONARY" not in encodings["sent"]  # a part's integers: deltas, not a dictionary
    assert compact_parts(metrics) == []
    for table in ("intervals", "histograms", "workers"):
        assert [p.name for p in (metrics / table).iterdir()] == ["parts-00000-00003.parquet"]
    assert sent(metrics / "intervals") == [1, 2, 3, 4]
    assert pq.read_schema(metrics / "intervals" / "parts-00000-00003.parquet") == schema
    assert written_flushes(metrics / "workers") == {0, 1, 2, 3}
    assert compact_parts(metrics) == []  # once merged, nothing more to do
    assert [p.name for p in (metrics / "intervals").iterdir()] == ["parts-00000-00003.parquet"]


def test_the_merges_behind_a_run_take_each_minute_of_flushes_then_each_chunk_of_those():
    assert [completed_ranges(n) for n in (0, 5, 11, 13, 23)] == [[]] * 5
    assert completed_ranges(12) == [range(0, 12)]
    assert completed_ranges(24) == [range(12, 24)]
    assert completed_ranges(144) == [range(132, 144), range(0, 144)]
    assert completed_ranges(1728) == [range(1716, 1728), range(1584, 1728), range(0, 1728)]


def test_a_runs_writer_merges_behind_it_in_order_and_its_end_merges_the_rest(tmp_path):
    metrics = tmp_path / "metrics"
    write_flushes(metrics, 30, behind=True).close()
    merged = ["parts-00000-00011.parquet", "parts-00012-00023.parquet"]
    for table in ("intervals", "histograms", "workers"):
        names = sorted(p.name for p in (metrics / table).iterdir())
        assert names == sorted(merged + [f"part-{n:05d}.parquet" for n in range(24, 30)]), table
    assert sent(metrics / "intervals") == list(range(1, 31))
    assert written_flushes(metrics / "workers") == set(range(30))
    assert compact_parts(metrics) == []
    assert [p.name for p in (metrics / "intervals").iterdir()] == ["parts-00000-00029.parquet"]
    assert sent(metrics / "intervals") == list(range(1, 31))


def test_merges_behind_merge_their_own_merged_files_a_level_up(tmp_path, monkeypatch):
    monkeypatch.setattr(metrics_parts, "CHUNK", 2)
    metrics = tmp_path / "metrics"
    write_flushes(metrics, 9, behind=True).close()  # 0-1, 2-3, 0-3, 4-5, 6-7, 4-7, 0-7
    names = sorted(p.name for p in (metrics / "intervals").iterdir())
    assert names == ["part-00008.parquet", "parts-00000-00007.parquet"]
    assert sent(metrics / "intervals") == list(range(1, 10))


def test_only_small_files_are_merged_and_never_across_a_large_one(tmp_path, monkeypatch):
    """A file of a row group's rows or more is left as it is (merging it rewrites every row for
    nothing); its small neighbours on each side merge apart, behind the run and at its end."""
    monkeypatch.setattr(metrics_parts, "CHUNK", 4)
    monkeypatch.setattr(metrics_parts, "ROW_GROUP_ROWS", 3)
    metrics = tmp_path / "metrics"
    writer = MetricsWriter(metrics, START, behind=True)
    for flush, clients in enumerate((1, 1, 3, 1, 1, 1, 1)):  # flush 2: a large part (3 rows of intervals)
        ids = [ClientInterval(f"p{c}", "producer", "t", sent=flush + 1) for c in range(clients)]
        writer.add(worker_report(0, START + flush + 1, ids), "measure")
        writer.flush()
    writer.close()  # behind: flushes 0-3 complete a chunk: 0-1 merged, 2 and 3 (alone after it) left
    names = sorted(p.name for p in (metrics / "intervals").iterdir())
    assert names == [f"part-0000{n}.parquet" for n in (2, 3, 4, 5, 6)] + ["parts-00000-00001.parquet"]
    assert sorted(p.name for p in (metrics / "workers").iterdir())[-1] == "parts-00000-00003.parquet"  # 1 row each
    assert compact_parts(metrics) == []
    names = sorted(p.name for p in (metrics / "intervals").iterdir())
    assert names == ["part-00002.parquet", "parts-00000-00001.parquet", "parts-00003-00006.parquet"]
    assert sent(metrics / "intervals") == [1, 2, 3, 3, 3, 4, 5, 6, 7]
    assert written_flushes(metrics / "intervals") == set(range(7))
    merged_workers = ["parts-00000-00003.parquet", "parts-00004-00006.parquet"]  # the first 4 rows: large
    assert sorted(p.name for p in (metrics / "workers").iterdir()) == merged_workers


def test_a_table_a_merge_behind_cannot_read_leaves_the_others_merged(tmp_path, monkeypatch):
    monkeypatch.setattr(metrics_parts, "CHUNK", 2)
    metrics = tmp_path / "metrics"
    write_flushes(metrics, 1)
    (metrics / "histograms" / "part-00000.parquet").write_bytes(b"cut short")  # sorted before the others
    writer = MetricsWriter(metrics, START, behind=True)
    writer.parts = 1
    client = ClientInterval("p0", "producer", "t", sent=2)
    publish = HistogramColumns.gather([{("publish", -1): ({3: 1}, 1, 1.0, 1.0)}])
    writer.add(worker_report(0, START + 2, [client], histograms=publish), "measure")
    writer.flush()  # completes flushes 0-1
    writer.close()
    assert sorted(p.name for p in (metrics / "histograms").iterdir()) == ["part-00000.parquet", "part-00001.parquet"]
    for table in ("intervals", "workers"):
        assert [p.name for p in (metrics / table).iterdir()] == ["parts-00000-00001.parquet"], table
    assert sent(metrics / "intervals") == [1, 2]


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


def test_parts_that_differ_in_columns_merge_a_row_group_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr("dimster.results.metrics_parts.ROW_GROUP_ROWS", 3)
    stats = tmp_path / "metrics" / "client_stats"  # its columns are the clients' statistics of the moment
    stats.mkdir(parents=True)
    pq.write_table(pa.table({"client_id": ["a", "b"], "rtt": [1, 2]}), stats / "part-00000.parquet")
    pq.write_table(
        pa.table({"client_id": ["c", "d"], "rtt": [3.5, 4.5], "batch": [7.0, 8.0]}), stats / "part-00001.parquet"
    )
    pq.write_table(pa.table({"client_id": ["e"], "rtt": [None]}), stats / "part-00002.parquet")
    assert compact_parts(tmp_path / "metrics") == []
    merged = pq.ParquetFile(stats / "parts-00000-00002.parquet")
    assert merged.metadata.num_row_groups == 2  # 4 rows held, then the last one
    assert merged.read().to_pydict() == {
        "client_id": ["a", "b", "c", "d", "e"],
        "rtt": [1.0, 2.0, 3.5, 4.5, None],
        "batch": [None, None, 7.0, 8.0, None],
    }


def test_a_merge_of_merged_files_holds_a_row_group_at_a_time_not_a_file(tmp_path, monkeypatch):
    """A long run's merged files hold millions of rows; a merge a level up (and the end's) reads them a
    row group at a time: its peak of Arrow memory stays that of a row group however big the files
    (read whole, 4 files of 400,000 rows took 3.4 times the memory 4 of 100,000 did). Each merge comes
    after reads that wake Arrow's pool of threads, as a run's other reads do: a row group decoded there
    was at times freed only after the next was read (peaks 1.08 to 1.6 times the least)."""
    monkeypatch.setattr("dimster.results.metrics_parts.ROW_GROUP_ROWS", 50_000)
    peaks = []
    for rows in (100_000, 400_000, 100_000, 400_000):
        table_dir = tmp_path / str(len(peaks)) / "intervals"
        table_dir.mkdir(parents=True)
        for i in range(4):
            values = pa.array(range(i * rows, (i + 1) * rows), pa.int64())
            pq.write_table(
                pa.table({"sent": values}),
                table_dir / f"parts-{12 * i:05d}-{12 * i + 11:05d}.parquet",
                row_group_size=50_000,
            )
        assert pq.read_table(table_dir).num_rows == 4 * rows  # Arrow's threads at work before the merge
        before = pa.default_memory_pool()
        pool = pa.proxy_memory_pool(before)  # a peak of this merge's own
        pa.set_memory_pool(pool)
        try:
            metrics_parts._merge(table_files(table_dir), table_dir / "parts-00000-00047.parquet")
        finally:
            pa.set_memory_pool(before)
        peaks.append((rows, pool.max_memory()))
        merged = pq.read_table(table_dir / "parts-00000-00047.parquet").column("sent")
        assert merged.to_pylist() == list(range(4 * rows))
    least = min(peak for _, peak in peaks)
    assert 0 < max(peak for _, peak in peaks) < 1.25 * least, peaks


def test_a_table_that_cannot_be_merged_stays_as_it_was_with_a_note(tmp_path):
    metrics = tmp_path / "metrics"
    write_flushes(metrics, 3)
    cut = metrics / "intervals" / "part-00001.parquet"
    cut.write_bytes(cut.read_bytes()[:-20])  # its footer gone
    mixed = metrics / "client_stats"
    mixed.mkdir()
    pq.write_table(pa.table({"a": [1.0]}), mixed / "part-00000.parquet")
    pq.write_table(pa.table({"a": ["words"]}), mixed / "part-00001.parquet")
    (metrics / "intervals" / ".part-00003.parquet.writing").write_bytes(b"half")  # a flush a kill cut short
    notes = compact_parts(metrics)
    assert [note.split(":")[0] for note in notes] == [
        "metrics/client_stats kept as it was",
        "metrics/intervals kept as it was",
    ]
    assert sorted(p.name for p in (metrics / "intervals").iterdir()) == [f"part-0000{n}.parquet" for n in range(3)]
    assert sent(metrics / "intervals") == [1, 3]  # the part cut short is left out with its note, as before
    assert [p.name for p in (metrics / "histograms").iterdir()] == ["parts-00000-00002.parquet"]
    assert not list(metrics.rglob(".*.writing"))  # the stale one removed, none left by the merges


def test_a_flush_writes_its_workers_part_last(tmp_path, monkeypatch):
    """A crashed run's recovery counts a flush written once its workers part exists: a kill between
    two tables' parts must leave the workers part unwritten, so the journal's tail writes the flush."""
    written = []
    replace = os.replace
    monkeypatch.setattr(
        os, "replace", lambda source, target: (written.append(Path(target).parent.name), replace(source, target))
    )
    write_flushes(tmp_path / "metrics", 1)
    assert written == ["intervals", "histograms", "workers"]


def test_a_writer_behind_tells_each_part_written_in_order(tmp_path):
    told: list[int] = []
    writer = MetricsWriter(tmp_path / "metrics", START, behind=True)
    for flush in range(3):
        writer.add(worker_report(0, START + flush + 1, [ClientInterval("p0", "producer", "t", sent=1)]), "measure")
        writer.flush(told.append)
    writer.close()
    assert told == [0, 1, 2]
    assert written_flushes(tmp_path / "metrics" / "workers") == {0, 1, 2}


def test_a_write_behind_that_fails_raises_at_close_and_tells_nothing_written(tmp_path):
    metrics = tmp_path / "metrics"
    metrics.write_text("a file where the folder should be")
    told: list[int] = []
    writer = MetricsWriter(metrics, START, behind=True)
    writer.add(worker_report(0, START + 1, [ClientInterval("p0", "producer", "t", sent=1)]), "measure")
    writer.flush(told.append)
    with pytest.raises(OSError):
        writer.close()
    assert told == []


def test_a_part_written_while_a_merge_removes_what_it_holds_is_kept(tmp_path, monkeypatch):
    """A run's writer adds a part at any moment, merges behind remove what a merged file holds: a
    part that lands between two listings of the table was taken for a held one and removed (the
    suite's merge test lost part 8 of 9 once). One listing decides now."""
    import shutil
    from pathlib import Path

    metrics = tmp_path / "metrics"
    write_flushes(metrics, 2)
    table = metrics / "intervals"
    metrics_parts._merge(table_files(table), table / "parts-00000-00001.parquet")
    late = table / "part-00002.parquet"
    glob = Path.glob

    def listing_then_a_part_lands(self, pattern):
        listed = list(glob(self, pattern))
        if self == table and not late.exists():
            shutil.copy(table / "part-00001.parquet", late)
        return iter(listed)

    monkeypatch.setattr(Path, "glob", listing_then_a_part_lands)
    metrics_parts._remove_held(table)
    assert sorted(p.name for p in table.iterdir()) == ["part-00002.parquet", "parts-00000-00001.parquet"]
