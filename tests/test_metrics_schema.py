"""metrics/schema.py declares each per-client metric once: its rows name fields the wire carries,
status fields that exist, unique Prometheus names, and they are what the writer writes and the
exporter serves."""

import dataclasses

import pytest

from dimster.clients.java import client_stats as java_client_stats
from dimster.clients.librdkafka import client_stats as extract_client_stats
from dimster.coordinator.control import client_series, status_schema
from dimster.metrics import schema
from dimster.metrics.client_stats import COLUMNS
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ClientInterval, worker_report


@pytest.mark.unit
def test_every_interval_column_is_a_field_of_the_wire():
    fields = {f.name for f in dataclasses.fields(ClientInterval)}
    assert set(schema.INTERVAL_COLUMNS) <= fields
    assert set(schema.CLIENT_COLUMNS) <= fields


@pytest.mark.unit
def test_rows_are_named_once_with_known_kinds_sources_and_status_fields():
    names = [m.name for m in schema.METRICS]
    assert len(names) == len(set(names))
    prometheus = [m.prometheus for m in schema.METRICS if m.prometheus]
    assert len(prometheus) == len(set(prometheus))
    assert not [p for p in prometheus if p.endswith("_total")]  # prometheus-client adds it to counters
    for m in schema.METRICS:
        assert m.kind in ("counter", "gauge", "histogram"), m
        assert m.source in ("intervals", "histograms", "client_stats", "summary"), m
        assert set(m.roles) <= set(schema.ALL_ROLES), m
        assert set(m.status) <= set(status_schema.NAMES), m
        assert m.client_table in ("", "producers", "consumers"), m
        assert not m.client_table or m.label, m  # a column in the report has a header


@pytest.mark.unit
def test_both_libraries_statistics_fill_exactly_the_client_stats_columns():
    assert set(extract_client_stats({})) == set(COLUMNS)
    assert set(java_client_stats("producer", {}, 0.0)) == set(COLUMNS)


@pytest.mark.unit
def test_the_exporter_serves_a_series_per_row_that_names_one():
    served = {name for name, *_ in client_series.COUNTERS.values()}
    served |= {name for name, *_ in client_series.GAUGES.values()}
    served |= {name for name, _ in client_series.LATENCIES.values()}
    served |= {name for name, _ in client_series.STATS_COUNTERS.values()}
    served |= {name for name, _ in client_series.STATS_GAUGES.values()}
    assert served == {m.prometheus for m in schema.METRICS if m.prometheus}


@pytest.mark.unit
def test_the_writer_writes_the_declared_columns(tmp_path):
    import pyarrow.parquet as pq

    writer = MetricsWriter(tmp_path, 100.0)
    stats = extract_client_stats({})
    client = ClientInterval("c0", "share_consumer", "t", "g", received=3, delivery_counts={1: 3}, client_stats=stats)
    latencies = HistogramColumns.gather([{("e2e", 0): ({5: 3}, 3, 10.0, 20.0)}])
    writer.add(worker_report(0, 101.0, [client], histograms=latencies), "measure")
    writer.flush()
    columns = {table.name: pq.read_table(table).column_names for table in tmp_path.iterdir()}
    first = [*schema.REPORT_COLUMNS, *schema.CLIENT_COLUMNS]
    assert columns["intervals"] == [*first, *schema.INTERVAL_COLUMNS]
    assert columns["histograms"] == [*first, *schema.HISTOGRAM_COLUMNS]
    assert columns["delivery_counts"] == [*first, *schema.DELIVERY_COUNT_COLUMNS]
    assert columns["client_stats"] == [*first, *schema.STATS_COLUMNS]
    assert columns["workers"] == [column for column, _ in schema.WORKER_COLUMNS]
    assert set(columns) <= set(schema.TABLES)


@pytest.mark.unit
def test_a_row_naming_a_client_table_is_a_column_of_the_reports_table(tmp_path, monkeypatch):
    """A consumers' counter declared for the report shows under its label, as a whole number, from the
    summary's per-client table."""
    import pandas as pd

    from dimster.report.clients import client_tables
    from dimster.report.data import load_run
    from tests.report_runs import Scenario, write_run

    row = schema.Metric("lock_timeouts", "counter", schema.SHARING, "messages", "intervals", label="lock time-outs",
                        client_table="consumers")  # fmt: skip
    monkeypatch.setattr(schema, "METRICS", (*schema.METRICS, row))
    run_dir = write_run(tmp_path, Scenario())
    path = run_dir / "summary" / "client_stats.csv"
    stats = pd.read_csv(path)
    stats["lock_timeouts"] = [None if role == "producer" else 1234.0 for role in stats.role]
    stats.to_csv(path, index=False)
    html = client_tables(load_run(run_dir))
    producers, consumers = html.split("Consumers")
    assert "lock time-outs" not in producers
    assert "<th>lock time-outs</th>" in consumers and "<td>1,234</td>" in consumers


@pytest.mark.unit
@pytest.mark.parametrize("group_rows", [250_000, 3])
def test_every_bucket_and_delivery_count_row_carries_its_own_clients_and_histograms_columns(
    tmp_path, monkeypatch, group_rows
):
    """The writer makes a row per bucket from a row per histogram and its client's row (by indexing,
    its names by their indices in a dictionary), a row group of reports at a time: each row must be
    the one a dict per bucket would have made, and each column read back as the schema declares."""
    import pyarrow.parquet as pq

    from dimster.results import metrics_writer

    monkeypatch.setattr(metrics_writer, "HISTOGRAM_GROUP_ROWS", group_rows)

    producer = ClientInterval("p3", "producer", "t1", sent=5)
    consumer = ClientInterval("c8", "share_consumer", "t2", "g", received=6, delivery_counts={1: 4, 2: 2})
    other = ClientInterval("c9", "share_consumer", "t2", "g")
    other.delivery_counts = {3: 1}
    latencies = {
        "p3": {("publish", -1): ({7: 5}, 5, 1.0, 2.0)},
        "c8": {("e2e", 0): ({10: 1, 11: 2, 12: 1}, 4, 3.0, 9.0), ("e2e", 4): ({30: 2}, 2, 20.0, 21.0)},
        "c9": {("e2e", 1): ({5: 1, 6: 1}, 2, 0.5, 0.7)},
    }
    writer = MetricsWriter(tmp_path, 100.0)
    first_report = HistogramColumns.gather([latencies["p3"], latencies["c8"]])
    writer.add(worker_report(0, 101.0, [producer, consumer], histograms=first_report), "warmup")
    writer.add(worker_report(2, 102.5, [other], histograms=HistogramColumns.gather([latencies["c9"]])), "measure")
    writer.flush()
    expected = []
    for end, phase, worker, c in ((101.0, "warmup", 0, producer), (101.0, "warmup", 0, consumer),
                                  (102.5, "measure", 2, other)):  # fmt: skip
        first = (end, round(end - 100.0, 3), phase, worker, c.client_id, c.role, c.topic, c.group)
        for (metric, partition), (counts, total, low, high) in latencies[c.client_id].items():
            expected += [(*first, metric, partition, b, n, total, low, high) for b, n in counts.items()]
    histograms = pq.read_table(tmp_path / "histograms")
    assert [tuple(r.values()) for r in histograms.to_pylist()] == expected
    (part,) = (tmp_path / "histograms").iterdir()
    assert pq.ParquetFile(part).metadata.num_row_groups == (1 if group_rows > len(expected) else 2)
    for table in ("histograms", "intervals", "delivery_counts", "workers"):  # strings, not dictionaries
        assert pq.read_table(tmp_path / table).schema.equals(metrics_writer.SCHEMAS[table]), table
    deliveries = pq.read_table(tmp_path / "delivery_counts").to_pylist()
    assert [(r["client_id"], r["worker"], r["delivery_count"], r["count"]) for r in deliveries] == [
        ("c8", 0, 1, 4),
        ("c8", 0, 2, 2),
        ("c9", 2, 3, 1),
    ]
