"""scripts/bench/report_arrow.py compares like with like: what Arrow's read of a report gives back is
what msgpack's decode gave, value for value, both ways of sending it."""

import random

import numpy as np
import pytest

from dimster.worker.protocol import Reported, decode, encode
from tests.bench import bench_script

pytestmark = pytest.mark.unit

arrow = bench_script("report_arrow")
codec = bench_script("report_codec")


@pytest.mark.parametrize("shape", ["scale", "5 % rejects", "one group"])
def test_arrows_read_of_a_report_is_what_msgpack_decoded(shape):
    random.seed(3)
    make = dict(codec.SHAPES)[shape]
    report = decode(encode(Reported(codec.with_latencies(7, make(7))))).report  # type: ignore[attr-defined]
    tables = arrow.tables(report)
    schemas = [t.schema for t in tables.values()]
    streams = arrow.read_streams([arrow.stream(t) for t in tables.values()])
    batches = arrow.read_batches([arrow.batch_only(t) for t in tables.values()], schemas)
    for read in (streams, batches):
        got = dict(zip(tables, read, strict=True))
        clients, histograms = report.clients, report.histograms
        assert got["clients"]["client_id"] == clients.client_id and got["clients"]["group"] == clients.group
        assert np.array_equal(got["clients"]["counts"], clients.counts)
        assert np.array_equal(got["clients"]["reals"], clients.reals)
        triples = np.column_stack([got["deliveries"][n] for n in ("client", "delivery", "records")])
        assert np.array_equal(triples.reshape(-1), clients.deliveries) and len(clients.deliveries) >= 15 * 3
        assert got["histograms"]["metric"] == histograms.metric
        assert np.array_equal(got["histograms"]["high"], histograms.high)
        assert np.array_equal(got["buckets"]["count"], histograms.count) and histograms.count.sum() > 0
        assert got["lines"]["end_time"].tolist() == [line.end_time for line in report.lines]
        # the ranges, key by key, as the decoded groups hold them
        keys, pairs = got["range keys"], np.column_stack([got["ranges"]["first"], got["ranges"]["last"]])
        names, at, rebuilt = got["groups"]["name"], 0, {}
        for group, kind, producer, delivery, count in zip(*(keys[n] for n in keys), strict=True):
            by_delivery = arrow.RANGE_KINDS[kind] not in ("settled", "settled_archived")  # keyed by producer alone
            key = (int(producer), int(delivery)) if by_delivery else int(producer)
            ranges = [tuple(map(int, pair)) for pair in pairs[at : at + count]]
            rebuilt.setdefault((names[group], arrow.RANGE_KINDS[kind]), {})[key] = ranges
            at += count
        assert at == len(pairs) > 0
        expected = {
            (name, kind): {key: list(ranges) for key, ranges in getattr(account, kind).items()}
            for name, account in report.groups.items()
            for kind in arrow.RANGE_KINDS
            if getattr(account, kind)
        }
        assert rebuilt == expected
