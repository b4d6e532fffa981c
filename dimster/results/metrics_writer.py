"""Metrics as Parquet under `metrics/<table>/part-NNNNN.parquet`, written every few seconds, so a
run that dies keeps everything up to its last flush (metrics_parts.py: which files hold a table). Row
counts follow intervals, clients and histogram buckets, never the message rate."""

import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dimster.metrics.schema import (
    CLIENT_COLUMNS,
    FIXED_SCHEMAS,
    INTERVAL_COLUMNS,
    REPORT_COLUMNS,
    TABLES,
)
from dimster.results.metrics_parts import MergeBehind
from dimster.worker.client_columns import COUNT_INDEX, NAMES, REAL_INDEX

ARROW_TYPES = {
    "float64": pa.float64(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "string": pa.string(),
    "map<string, string>": pa.map_(pa.string(), pa.string()),
}
SCHEMAS = {
    table: pa.schema([(column, ARROW_TYPES[kind]) for column, kind in columns])
    for table, columns in FIXED_SCHEMAS.items()
}
FIRST = (*REPORT_COLUMNS, *CLIENT_COLUMNS)  # a client's row: the report's columns, then the client's
# a report's histogram columns (worker/histogram_columns.py) of numbers; a bucket's row takes its
# histogram's own under these names (its metric too, and FIRST from its client's row of intervals)
NUMBERED = ("client", "partition", "total", "low", "high", "size", "bucket", "count")
HISTOGRAM_GROUP_ROWS = 250_000  # the histograms' rows a flush builds and writes at a time (Buffers.tables)
HISTOGRAM_OWN = {"partition": "partition", "hist_total": "total", "hist_min": "low", "hist_max": "high"}
if unknown := set(INTERVAL_COLUMNS) - set(NAMES) - set(COUNT_INDEX) - set(REAL_INDEX):
    raise ValueError(f"interval columns that no client counts: {sorted(unknown)}")  # a mistake in schema.py


class Report(Protocol):
    """What the writer reads of an interval report (worker/protocol.py's IntervalReport): a line per
    worker (its index, end and usage: WORKER_COLUMNS), the clients of each line after the previous
    line's, as columns (a name or a counter per column of CLIENT_COLUMNS and INTERVAL_COLUMNS), and
    their histograms."""

    lines: Any  # its WorkerLine's (worker_index, end_time, clients, cpu_seconds, ..., cores)
    clients: Any  # a ClientColumns (worker/client_columns.py)
    histograms: Any  # a HistogramColumns (worker/histogram_columns.py): its clients' histograms

    @property
    def client_line(self) -> Any:  # each client's line (an index of `lines`), as an array
        ...


class Buffers:
    """What a flush writes, kept cheap to add to: a tuple per worker; per report its columns and its
    clients' counters as it brought them (ClientColumns: a list per name, a row of numbers a client)
    and its histograms' columns, joined into columns at the flush; a histogram's row per bucket made
    there by numpy indexing, its client's names taken by their indices in a dictionary (no Python
    object per bucket and column); the same for delivery counts; the rarer tables as dicts."""

    def __init__(self) -> None:
        self.workers: list[tuple] = []
        self.reports: list[tuple] = []  # REPORT_COLUMNS of each report with clients
        self.report_sizes: list[int] = []  # its clients
        self.names: dict[str, list[str]] = {name: [] for name in NAMES}
        self.counts: list[np.ndarray] = []  # a report's, a row a client (COUNTS)
        self.reals: list[np.ndarray] = []  # (REALS)
        self.rows = 0  # clients' rows so far: the next one's index in intervals
        self.histograms: list[tuple[int, Any]] = []  # (its first client's row in intervals, a report's histograms)
        self.deliveries: list[np.ndarray] = []  # a report's (client's row in intervals, delivery count, records)
        self.dicts: dict[str, list[dict]] = defaultdict(list)

    def tables(self) -> dict[str, Iterable[pa.Table]]:
        """The tables with rows, in TABLES' order, `workers` last (a crashed run's recovery takes a
        flush as written once its workers part is: write_tail), each as the row groups it is written
        in: one, but the histograms' a group of at most about HISTOGRAM_GROUP_ROWS rows at a time
        (a flush of a thousand workers has millions; memory of that size costs more to touch than
        to fill). Their string columns (but the rarer tables') are dictionary-encoded: written
        without Arrow's schema, they read back as strings."""
        made = {table: pa.Table.from_pylist(rows, schema=SCHEMAS.get(table)) for table, rows in self.dicts.items()}
        made["workers"] = _from_rows(self.workers, SCHEMAS["workers"])
        intervals = self._interval_columns()
        made["intervals"] = _table("intervals", intervals)
        if self.deliveries:
            rows = np.concatenate(self.deliveries)
            own = {"delivery_count": rows[:, 1], "count": rows[:, 2]}
            made["delivery_counts"] = _of_clients("delivery_counts", intervals, rows[:, 0], own)
        groups: dict[str, Iterable[pa.Table]] = {table: [rows] for table, rows in made.items() if rows.num_rows}
        if any(len(h.bucket) for _, h in self.histograms):
            groups["histograms"] = self._histograms(intervals)
        return {table: groups[table] for table in TABLES if table in groups}

    def _interval_columns(self) -> dict[str, Any]:
        """A row per client interval: its report's columns, its names, its counters, by column name."""
        if not self.rows:
            return {f.name: pa.array([], f.type) for f in SCHEMAS["intervals"]}
        each = np.repeat(np.arange(len(self.reports)), self.report_sizes)  # a client's report
        of_reports = zip(REPORT_COLUMNS, zip(*self.reports, strict=True), strict=True)
        columns = {name: _taken(_strings(list(v)) if _named(name) else np.array(v), each) for name, v in of_reports}
        columns |= {name: _strings(values) for name, values in self.names.items()}
        counts, reals = np.concatenate(self.counts), np.concatenate(self.reals)
        columns |= {name: counts[:, COUNT_INDEX[name]] for name in INTERVAL_COLUMNS if name in COUNT_INDEX}
        columns |= {name: reals[:, REAL_INDEX[name]] for name in INTERVAL_COLUMNS if name in REAL_INDEX}
        return columns

    def _histograms(self, intervals: dict[str, Any]) -> Iterator[pa.Table]:
        """A row per histogram bucket: its client's columns, its histogram's, its bucket's; the
        reports' histograms a group of at most about HISTOGRAM_GROUP_ROWS buckets at a time."""
        group: list[tuple[int, Any]] = []
        buckets = 0
        for first_row, h in self.histograms:
            group.append((first_row, h))
            buckets += len(h.bucket)
            if buckets >= HISTOGRAM_GROUP_ROWS:
                yield _histogram_rows(group, intervals)
                group, buckets = [], 0
        if buckets:
            yield _histogram_rows(group, intervals)


def _histogram_rows(reports: list[tuple[int, Any]], intervals: dict[str, Any]) -> pa.Table:
    """The buckets' rows of reports' histograms (each with its first client's row in `intervals`)."""
    parts = [h for _, h in reports]
    joined = {name: np.concatenate([getattr(h, name) for h in parts]) for name in NUMBERED}
    client = np.concatenate([h.client + first for first, h in reports])
    each = np.repeat(np.arange(len(client)), joined["size"])  # a bucket's histogram
    own = {column: joined[name][each] for column, name in HISTOGRAM_OWN.items()}
    own["metric"] = _strings([metric for h in parts for metric in h.metric]).take(each)
    own |= {"bucket": joined["bucket"], "count": joined["count"]}
    return _of_clients("histograms", intervals, client[each], own)


def _write_parquet(path: Path, row_groups: Iterable[pa.Table]) -> None:
    """Parquet's own types (strings, not dictionaries); no statistics (a summary reads every row; the
    merges' files have them). Dictionaries for strings only, integers delta-encoded: a third less CPU
    than a dictionary for every column, the same bytes (a flush's histograms of 1,024 workers;
    docs/benchmarks.md)."""
    out = None
    try:
        for rows in row_groups:
            if out is None:
                out = pq.ParquetWriter(
                    path, rows.schema, store_schema=False, write_statistics=False, **_encodings(rows)
                )
            out.write_table(rows)
    finally:
        if out:
            out.close()


def _encodings(rows: pa.Table) -> dict[str, Any]:
    """A part's columns' encodings: a dictionary for each string column, deltas for each integer one."""
    kinds = [(f.name, f.type) for f in rows.schema]
    strings = [name for name, kind in kinds if pa.types.is_dictionary(kind) or pa.types.is_string(kind)]
    integers = {name: "DELTA_BINARY_PACKED" for name, kind in kinds if kind in (pa.int32(), pa.int64())}
    return {"use_dictionary": strings, "column_encoding": integers}


def _strings(values: list[str]) -> pa.DictionaryArray:
    """Names as a dictionary of the distinct ones and an index a row: a row per bucket takes an index."""
    return pa.array(values, pa.string()).dictionary_encode()


def _named(column: str) -> bool:
    """Whether a column of intervals holds strings."""
    return SCHEMAS["intervals"].field(column).type == pa.string()


def _of_clients(table: str, intervals: dict[str, Any], clients: np.ndarray, own: dict[str, Any]) -> pa.Table:
    """A table whose rows each take FIRST from a client's row of `intervals` (`clients`: the row of
    each), then their `own` columns."""
    firsts = {name: _taken(intervals[name], clients) for name in FIRST}
    return _table(table, firsts | own)


def _taken(column: Any, rows: np.ndarray) -> Any:
    """A column's `rows`, numpy's or a dictionary's."""
    return column[rows] if isinstance(column, np.ndarray) else column.take(rows)


def _table(table: str, columns: dict[str, Any]) -> pa.Table:
    """`columns` in the table's schema: numbers as its types, strings as they are (a dictionary)."""
    arrays = [columns[f.name] if f.type == pa.string() else pa.array(columns[f.name], f.type) for f in SCHEMAS[table]]
    return pa.Table.from_arrays(arrays, names=SCHEMAS[table].names)


def _from_rows(rows: list[tuple], schema: pa.Schema) -> pa.Table:
    """A table of rows in the schema's column order: one zip to columns, an Arrow array each."""
    if not rows:
        return schema.empty_table()
    transposed = zip(*rows, strict=True)
    arrays = [pa.array(column, kind) for column, kind in zip(transposed, schema.types, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


class MetricsWriter:
    def __init__(self, folder: Path, load_started: float, behind: bool = False):
        """`behind`: write the parts on a thread of their own and merge them while the run goes on (a
        run's own writer: the run's loop never waits on a write; close() at its end)."""
        self.folder = folder
        self.load_started = load_started
        self.buffers = Buffers()
        self.parts = 0
        self.merges = MergeBehind(folder) if behind else None
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="metrics-writer") if behind else None
        self.writes: list[Future] = []

    def add(self, report: Report, phase: str) -> None:
        b = self.buffers
        firsts = []  # each line's REPORT_COLUMNS
        for line in report.lines:
            first = (line.end_time, round(line.end_time - self.load_started, 3), phase, line.worker_index)
            lag = line.wake_lag
            wake_lag = (lag.wakes, lag.lag_ms_sum, lag.lag_ms_max) if lag else (0, 0.0, 0.0)
            # a worker's row: the report's columns, then its usage and its wake probe's lateness (WORKER_COLUMNS)
            usage = (line.cpu_seconds, line.rss_bytes, line.threads, *wake_lag, line.steal_seconds, line.cores)
            b.workers.append((*first, *usage))
            firsts.append(first)
        clients = report.clients
        first_row = b.rows
        if len(report.histograms):  # a histogram's row takes its client's columns from the client's row of intervals
            b.histograms.append((first_row, report.histograms))
        if not len(clients):
            return
        for line, first in zip(report.lines, firsts, strict=True):
            if line.clients:
                b.reports.append(first)
                b.report_sizes.append(line.clients)
        for name, values in b.names.items():
            values.extend(getattr(clients, name))
        counts, reals = clients.tables
        b.counts.append(counts)
        b.reals.append(reals)
        b.rows += len(clients)
        if len(clients.deliveries):
            b.deliveries.append(clients.delivery_rows(first_row))
        for i, details in clients.details.items():
            if details.client_stats:
                owner = int(report.client_line[i])
                client = (*firsts[owner], *(getattr(clients, name)[i] for name in CLIENT_COLUMNS))
                b.dicts["client_stats"].append({**dict(zip(FIRST, client, strict=True)), **details.client_stats})

    def add_broker_samples(self, at: float, broker: int, samples, phase: str) -> None:
        common = {"end_time": at, "run_time_s": round(at - self.load_started, 3), "phase": phase, "broker": broker}
        self.buffers.dicts["brokers"].extend(
            {**common, "metric": name, "labels": sorted(labels.items()), "value": value}
            for name, labels, value in samples
        )

    def add_group_lag(self, sample, backlogs: dict[str, int], phase: str) -> None:
        """A LagSample, with dimster's backlog per group (acknowledged, not yet settled) beside it."""
        common = {"end_time": sample.at, "run_time_s": round(sample.at - self.load_started, 3), "phase": phase}
        for group, partitions in sample.groups.items():
            rows = [
                {**common, "group": group, "partition": p, "start_offset": start, "lag": lag, "backlog": None}
                for p, (start, lag) in sorted(partitions.items())
            ]
            total = {"partition": -1, "start_offset": None, "lag": sample.lag(group), "backlog": backlogs.get(group)}
            self.buffers.dicts["group_lag"].extend([*rows, {**common, "group": group, **total}])

    def flush(self, written: Callable[[int], None] | None = None) -> None:
        """Write what was added since the last flush as part number `parts`, then call `written` with
        it; a writer `behind` hands the part to its thread and returns at once (a write that failed
        raises at the next flush or at close)."""
        buffers, part = self.buffers, self.parts
        self.buffers = Buffers()
        self.parts += 1
        if self.writer is None:
            self._write(buffers, part, written)
            return
        for done in [w for w in self.writes if w.done()]:
            self.writes.remove(done)
            done.result()
        self.writes.append(self.writer.submit(self._write, buffers, part, written))

    def _write(self, buffers: Buffers, part: int, written: Callable[[int], None] | None) -> None:
        for table, row_groups in buffers.tables().items():
            path = self.folder / table / f"part-{part:05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            # whole or not at all: a reader never sees a part half written (Spark skips names with a dot)
            writing = path.with_name(f".{path.name}.writing")
            _write_parquet(writing, row_groups)
            os.replace(writing, path)
        if written:
            written(part)
        if self.merges:
            self.merges.flushed(part + 1)

    def close(self) -> None:
        """After the last flush: wait for the writes and the merges behind, if any."""
        try:
            if self.writer:
                self.writer.shutdown(wait=True)
                for write in self.writes:
                    write.result()
        finally:
            if self.merges:
                self.merges.close()
