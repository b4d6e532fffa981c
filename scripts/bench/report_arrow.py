"""A worker report as Arrow IPC beside the protocol's msgpack: the candidate issue 48 named, measured.

The reports are report_codec.py's three shapes (30 clients). Each is encoded as the protocol does and
decoded as the coordinator does (msgspec into the typed report: strings as lists, packed columns as
numpy arrays, ranges as pairs). The same content as Arrow: one table per part of the report (the
worker's lines, the clients with their counts and reals, the delivery counts, the histograms, their
buckets, the groups' names, their ranges' keys (group, kind, producer, delivery count: numbers) and
the ranges, as msgpack groups them), each an IPC stream.
Two ways to send it: a stream per report, each table with its schema (`arrow, schemas in each`), or
the schemas sent once per connection and a report as record batches only (`arrow, batches only`).
Arrow's read of a report makes what the coordinator then takes: numeric columns as numpy arrays (no
copy), strings as lists; its ranges stay arrays, less than msgpack's decode makes of them (pairs),
so the comparison favours Arrow there. Arrow's encoding starts from the tables, which a worker would
first have to build: it favours Arrow too.

    .venv/bin/python scripts/bench/report_arrow.py [--reports 300] [--repeat 5]

Per report, CPU time (`time.process_time`), median of `--repeat` rounds, the ways alternating.
"""

import argparse
import random
import statistics
import time

import numpy as np
import pyarrow as pa
from report_codec import print_shapes, with_latencies  # beside this script

from dimster.worker.client_columns import COUNTS, REALS
from dimster.worker.protocol import IntervalReport, Reported, decode, encode

RANGE_KINDS = ("settled", "settled_rejected", "settled_archived", "received_again", "in_doubt")


def tables(report: IntervalReport) -> dict[str, pa.Table]:
    """The report's content as Arrow tables, numbers as numbers and strings as strings."""
    c, h = report.clients, report.histograms
    lines = {
        name: [getattr(line, name) for line in report.lines]
        for name in ("worker_index", "end_time", "clients", "cpu_seconds", "rss_bytes", "threads", "steal_seconds")
    }
    clients = {name: getattr(c, name) for name in ("client_id", "role", "topic", "group", "library")}
    clients["counts"] = pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(c.counts)), len(COUNTS))
    clients["reals"] = pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(c.reals)), len(REALS))
    triples = np.asarray(c.deliveries).reshape(-1, 3)
    histograms = {
        name: np.asarray(getattr(h, name)) for name in ("client", "partition", "total", "low", "high", "size")
    }
    keys: dict[str, list] = {name: [] for name in ("group", "kind", "producer", "delivery", "ranges")}
    pairs: list = []  # every key's ranges, one after another, as (first, last) rows
    for group, account in enumerate(report.groups.values()):
        for kind, name in enumerate(RANGE_KINDS):
            for key, ranges in getattr(account, name).items():
                producer, delivery = key if isinstance(key, tuple) else (key, 0)
                for column, value in zip(keys, (group, kind, producer, delivery, len(ranges)), strict=True):
                    keys[column].append(value)
                pairs += ranges
    flat = np.array(pairs, np.int64).reshape(-1, 2)
    return {
        "lines": pa.table(lines),
        "clients": pa.table(clients),
        "deliveries": pa.table({"client": triples[:, 0], "delivery": triples[:, 1], "records": triples[:, 2]}),
        "histograms": pa.table({"metric": h.metric, **histograms}),
        "buckets": pa.table({"bucket": np.asarray(h.bucket), "count": np.asarray(h.count)}),
        "groups": pa.table({"name": list(report.groups)}),
        "range keys": pa.table(keys),
        "ranges": pa.table({"first": flat[:, 0], "last": flat[:, 1]}),
    }


def stream(table: pa.Table) -> bytes:
    """A table as one IPC stream: its schema, then its one record batch."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def batch_only(table: pa.Table) -> bytes:
    """A table's one record batch as an IPC message, without its schema (known from the connection)."""
    [batch] = table.combine_chunks().to_batches() or [pa.record_batch([], schema=table.schema)]
    return batch.serialize().to_pybytes()


def taken(table: pa.Table) -> dict:
    """What the coordinator takes of a table: numbers as numpy arrays, strings as lists."""
    columns = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        kind = column.type
        if pa.types.is_string(kind):
            columns[name] = column.to_pylist()
        elif pa.types.is_fixed_size_list(kind):
            columns[name] = column.combine_chunks().flatten().to_numpy()
        else:
            columns[name] = column.to_numpy()
    return columns


def read_streams(parts: list[bytes]) -> list[dict]:
    return [taken(pa.ipc.open_stream(part).read_all()) for part in parts]


def read_batches(parts: list[bytes], schemas: list[pa.Schema]) -> list[dict]:
    read = pa.ipc.read_record_batch
    return [taken(pa.Table.from_batches([read(pa.py_buffer(p), s)])) for p, s in zip(parts, schemas, strict=True)]


def timed(work, items: list) -> tuple[list, float]:
    """`work` of each item, and its CPU µs an item."""
    started = time.process_time()
    done = [work(item) for item in items]
    return done, 1e6 * (time.process_time() - started) / len(items)


def measure(make, reports: int) -> dict:
    """One round: each way's bytes, encoding and decoding, µs a report."""
    made = [with_latencies(k, make(k)) for k in range(reports)]
    datas, msgpack_encode = timed(lambda r: encode(Reported(r)), made)
    decoded, msgpack_decode = timed(lambda data: decode(data).report, datas)
    as_tables = [tables(r) for r in decoded]
    schemas = [t.schema for t in as_tables[0].values()]
    streams, arrow_encode = timed(lambda ts: [stream(t) for t in ts.values()], as_tables)
    batches = [[batch_only(t) for t in ts.values()] for ts in as_tables]
    return {
        "msgpack bytes": statistics.mean(map(len, datas)),
        "arrow bytes, schemas in each": statistics.mean(sum(map(len, s)) for s in streams),
        "arrow bytes, batches only": statistics.mean(sum(map(len, b)) for b in batches),
        "msgpack encode": msgpack_encode,
        "arrow encode (from the tables)": arrow_encode,
        "msgpack decode": msgpack_decode,
        "arrow decode, schemas in each": timed(read_streams, streams)[1],
        "arrow decode, batches only": timed(lambda parts: read_batches(parts, schemas), batches)[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    random.seed(1)
    print(f"per report of 30 clients ({args.reports} reports, CPU µs, median of {args.repeat} rounds)")
    print_shapes(measure, args.reports, args.repeat)


if __name__ == "__main__":
    main()
