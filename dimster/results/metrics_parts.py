"""Which Parquet files hold a metrics table: `metrics/<table>/part-NNNNN.parquet`, one per flush while
a run goes on (a run that dies keeps every flush), and after a run's end one `parts-FIRST-LAST.parquet`
per table that holds parts FIRST to LAST in order (compact_parts). A Spark summary opens every file of a
table for each query: a 10-minute run's 118 parts a table cost it some 5 s of its 9. A merged file is
written whole before the parts it holds are removed: one left behind by a crash is skipped."""

import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

PART = re.compile(r"part-(\d+)\.parquet")
MERGED = re.compile(r"parts-(\d+)-(\d+)\.parquet")
MERGE_THREADS = 4


def table_files(table_dir: Path) -> list[tuple[Path, range]]:
    """The table's files in order, each with the flushes it holds; a part a merged file holds, and a
    merged file another holds, are left out."""
    found = [(path, flushes) for path in table_dir.glob("*.parquet") if (flushes := _flushes(path)) is not None]
    merges = [flushes for path, flushes in found if MERGED.fullmatch(path.name)]
    kept = [(path, flushes) for path, flushes in found if not any(_held(flushes, other) for other in merges)]
    return sorted(kept, key=lambda item: (item[1].start, item[0].name))


def written_flushes(table_dir: Path) -> set[int]:
    """The flushes (MetricsWriter.parts) whose rows a file of the table holds."""
    return {flush for _, flushes in table_files(table_dir) for flush in flushes}


def readable_parts(table_dir: Path) -> tuple[dict[Path, int], list[str]]:
    """A table's files whose Parquet footer reads, in order, each with its rows (from the footer);
    and a note for each that does not (a part cut short by a crash or a full disk is left out of the
    summary, not the reason it fails)."""
    parts, notes = {}, []
    for path, _ in table_files(table_dir):
        try:
            parts[path] = pq.read_metadata(path).num_rows
        except (OSError, ValueError) as e:
            notes.append(f"{path.parent.name}/{path.name} is unreadable and left out: {str(e).splitlines()[0]}")
    return parts, notes


def compact_parts(metrics: Path) -> list[str]:
    """Merge each table's files into one, in order, the tables at once (reading a part is mostly
    Arrow's, off the GIL); a note for each table left as it was (a part that does not read, parts
    that do not agree on a column's type, a full disk)."""
    tables = sorted(p for p in metrics.iterdir() if p.is_dir()) if metrics.is_dir() else []
    with ThreadPoolExecutor(MERGE_THREADS, thread_name_prefix="merge") as pool:
        return [note for note in pool.map(_compact_table, tables) if note]


def _compact_table(table_dir: Path) -> str | None:
    files = table_files(table_dir)
    if len(files) < 2:
        _remove_held(table_dir)  # a merge a crash cut short may have left parts behind
        return None
    merged = table_dir / f"parts-{files[0][1].start:05d}-{files[-1][1].stop - 1:05d}.parquet"
    writing = merged.with_name(f".{merged.name}.writing")  # whole or not at all, as a part is written
    try:
        whole = pa.concat_tables([pq.ParquetFile(path).read() for path, _ in files], promote_options="permissive")
        pq.write_table(whole, writing)
        os.replace(writing, merged)
    except (OSError, ValueError, pa.ArrowException) as e:
        writing.unlink(missing_ok=True)
        return f"metrics/{table_dir.name} kept in {len(files)} files: {str(e).splitlines()[0]}"
    _remove_held(table_dir)
    return None


def _remove_held(table_dir: Path) -> None:
    """Remove the files of the table that a merged file holds."""
    kept = {path for path, _ in table_files(table_dir)}
    for path in table_dir.glob("*.parquet"):
        if path not in kept and _flushes(path) is not None:
            path.unlink()


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
