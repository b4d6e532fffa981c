"""Which Parquet files hold a metrics table: `metrics/<table>/part-NNNNN.parquet`, one per flush while
a run goes on (a run that dies keeps every flush), merged as it goes into `parts-FIRST-LAST.parquet`
files that hold flushes FIRST to LAST in order (MergeBehind: every CHUNK flushes, and every CHUNK of
those ...), and after its end into as few files as it takes (compact_parts). A Spark summary opens
every file of a table for each query (a 10-minute run's 118 parts a table cost it some 5 s of its 9),
and a merge pays for each file it opens (0.5 s for those 118 parts of 7 tables, 0.15 s for their merged
files). Only small files are merged: one of ROW_GROUP_ROWS rows or more holds whole row groups already,
as a merge would write them, and merging it costs a read and a write of every row for nothing (at a
thousand workers, a flush's histograms are over a million rows: a sixth of the coordinator's CPU). A
merged file is written whole before the files it holds are removed: one left behind by a crash is
skipped."""

import contextlib
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dimster.processes import nice_this_thread

PART = re.compile(r"part-(\d+)\.parquet")
MERGED = re.compile(r"parts-(\d+)-(\d+)\.parquet")
MERGE_THREADS = 4
ROW_GROUP_ROWS = 250_000  # a merge holds about this many rows of a table in memory at once
CHUNK = 12  # files a merge during the run takes at once: a minute of flushes, or CHUNK merged files


def table_files(table_dir: Path) -> list[tuple[Path, range]]:
    """The table's files in order, each with the flushes it holds; a part a merged file holds, and a
    merged file another holds, are left out."""
    found, merges = _listing(table_dir)
    kept = [(path, flushes) for path, flushes in found if not any(_held(flushes, other) for other in merges)]
    return sorted(kept, key=lambda item: (item[1].start, item[0].name))


def _listing(table_dir: Path) -> tuple[list[tuple[Path, range]], list[range]]:
    """The table's files with the flushes each holds, and the merged files' flushes: one listing."""
    found = [(path, flushes) for path in table_dir.glob("*.parquet") if (flushes := _flushes(path)) is not None]
    return found, [flushes for path, flushes in found if MERGED.fullmatch(path.name)]


def written_flushes(table_dir: Path) -> set[int]:
    """The flushes (MetricsWriter.parts) whose rows a file of the table holds. A merged file counts
    every flush of its range, also one that wrote no row to this table: it merges flushes that are
    done, and a report the journal tags with such a flush was written by it."""
    return {flush for _, flushes in table_files(table_dir) for flush in flushes}


def readable_parts(table_dir: Path) -> tuple[dict[Path, pq.FileMetaData], list[str]]:
    """A table's files whose Parquet footer reads, in order, each with its footer (rows, schema); and
    a note for each that does not (a part cut short by a crash or a full disk is left out of the
    summary, not the reason it fails)."""
    parts, notes = {}, []
    for path, _ in table_files(table_dir):
        try:
            parts[path] = pq.read_metadata(path)
        except (OSError, ValueError) as e:
            notes.append(f"{path.parent.name}/{path.name} is unreadable and left out: {str(e).splitlines()[0]}")
    return parts, notes


class MergeBehind:
    """Merges the tables' small files on a thread of its own while a run goes on, so that its end merges
    a few files a table however long it ran: after flush number CHUNK**L * k - 1, those of the CHUNK**L
    flushes before (at each level L that completes; small_runs). A merge that fails leaves its files as
    they were, for the end's merge (compact_parts), which says so."""

    def __init__(self, metrics: Path):
        self.metrics = metrics
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="merge-behind", initializer=nice_this_thread)

    def flushed(self, flushes: int) -> None:
        """Flushes 0 .. `flushes` - 1 are written: merge what they complete."""
        for within in completed_ranges(flushes):
            self.pool.submit(self._merge_tables, within)

    def close(self) -> None:
        """Wait for the merges asked for (before the end's merge, which must be the only one)."""
        self.pool.shutdown(wait=True)

    def _merge_tables(self, within: range) -> None:
        for table_dir in sorted(p for p in self.metrics.iterdir() if p.is_dir()):
            with contextlib.suppress(OSError, ValueError, pa.ArrowException):  # the end's merge tries again
                files = [(path, flushes) for path, flushes in table_files(table_dir) if _held(flushes, within)]
                runs = small_runs(files)
                for run in runs:
                    _merge(run, table_dir / _merged_name(run))
                if runs:
                    _remove_held(table_dir)


def completed_ranges(flushes: int) -> list[range]:
    """The flush ranges that flush number `flushes` - 1 completes, smallest first."""
    ranges, size = [], CHUNK
    while flushes and flushes % size == 0:
        ranges.append(range(flushes - size, flushes))
        size *= CHUNK
    return ranges


def small_runs(files: list[tuple[Path, range]]) -> list[list[tuple[Path, range]]]:
    """Of a table's files in order, each run of two or more neighbours with fewer than ROW_GROUP_ROWS
    rows each: what is worth merging (a merged file holds the flushes between its first and its last,
    so a run never reaches over a file it leaves)."""
    runs: list[list[tuple[Path, range]]] = [[]]
    for path, flushes in files:
        if pq.read_metadata(path).num_rows < ROW_GROUP_ROWS:
            runs[-1].append((path, flushes))
        elif runs[-1]:
            runs.append([])
    return [run for run in runs if len(run) >= 2]


def compact_parts(metrics: Path) -> list[str]:
    """Merge each table's small files (small_runs), a file a run of them, in order, the tables at once
    (reading a part is mostly Arrow's, off the GIL); a note for each table left as it was (a part that
    does not read, parts that do not agree on a column's type, a full disk): a merge never fails the run."""
    try:
        tables = sorted(p for p in metrics.iterdir() if p.is_dir()) if metrics.is_dir() else []
    except OSError as e:
        return [f"{metrics} was not merged: {e}"]
    with ThreadPoolExecutor(MERGE_THREADS, thread_name_prefix="merge") as pool:
        return [note for note in pool.map(_compact_table, tables) if note]


def _compact_table(table_dir: Path) -> str | None:
    try:
        for stale in table_dir.glob(".*.writing"):  # of a flush or a merge a kill cut short: never whole
            stale.unlink()
        for run in small_runs(table_files(table_dir)):
            _merge(run, table_dir / _merged_name(run))
        _remove_held(table_dir)  # also what a merge cut short by a crash left behind
    except (OSError, ValueError, pa.ArrowException) as e:
        return f"metrics/{table_dir.name} kept as it was: {str(e).splitlines()[0]}"
    return None


def _merged_name(files: list[tuple[Path, range]]) -> str:
    return f"parts-{files[0][1].start:05d}-{files[-1][1].stop - 1:05d}.parquet"


def _merge(files: list[tuple[Path, range]], merged: Path) -> None:
    """Write `files`' rows, in order, into `merged`: whole or not at all (a hidden name, synced, then
    renamed and the rename synced), before any part it holds is removed; a row group of at most
    ROW_GROUP_ROWS rows at a time in memory."""
    writing = merged.with_name(f".{merged.name}.writing")
    schema = pa.unify_schemas([pq.read_schema(path) for path, _ in files], promote_options="permissive")
    try:
        with pq.ParquetWriter(writing, schema) as out:
            pending: list[pa.Table] = []
            for rows in _row_groups(files):
                pending.append(_conformed(rows, schema))
                if sum(t.num_rows for t in pending) >= ROW_GROUP_ROWS:
                    out.write_table(pa.concat_tables(pending))
                    pending = []
            if pending:
                out.write_table(pa.concat_tables(pending))
        with writing.open("rb+") as written:
            os.fsync(written.fileno())
        os.replace(writing, merged)
    finally:
        writing.unlink(missing_ok=True)
    directory = os.open(merged.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _row_groups(files: list[tuple[Path, range]]) -> Iterator[pa.Table]:
    """The files' rows in order, a row group at a time: a merged file is read a row group at a time,
    never whole (one of a long run holds millions of rows). Decoded on this thread: decoded on Arrow's
    pool, a row group's buffers were at times freed there only after the next was read, so a merge's
    peak varied with the threads' timing, up to 1.6 times its least (tests/test_metrics_parts.py)."""
    for path, _ in files:
        with pq.ParquetFile(path) as file:
            for group in range(file.num_row_groups):
                yield file.read_row_group(group, use_threads=False)


def _conformed(part: pa.Table, schema: pa.Schema) -> pa.Table:
    """`part` with `schema`'s columns, in its order and types (a column it lacks: nulls)."""
    columns = [
        part.column(field.name).cast(field.type) if field.name in part.column_names else pa.nulls(len(part), field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _remove_held(table_dir: Path) -> None:
    """Remove the files of the table that a merged file holds, by one listing: a part that a run's
    writer adds meanwhile is no merged file's, and stays (two listings took it for one)."""
    found, merges = _listing(table_dir)
    for path, flushes in found:
        if any(_held(flushes, other) for other in merges):
            path.unlink(missing_ok=True)


def _flushes(path: Path) -> range | None:
    """The flushes a file holds, by its name; None for a file that is not a table's."""
    if part := PART.fullmatch(path.name):
        return range(int(part[1]), int(part[1]) + 1)
    if merged := MERGED.fullmatch(path.name):
        return range(int(merged[1]), int(merged[2]) + 1)
    return None


def _held(flushes: range, merged: range) -> bool:
    """Whether a merged file of `merged` holds a file of `flushes` (itself does not)."""
    return flushes != merged and merged.start <= flushes.start and flushes.stop <= merged.stop
