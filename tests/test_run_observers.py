"""What the coordinator's run loop shows while it runs, driven by in-memory workers and cluster: the
metrics endpoint, the console line, client statistics and the brokers' scraper."""

import json
import socket
import threading
import time

import pytest

from dimster.errors import DimsterError
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import (
    worker_report,
)
from tests.conftest import busy_port
from tests.fake_run import FakeWorkers, coordinator
from tests.runs import scrape, scrape_samples
from tests.waiting import until

pytestmark = pytest.mark.unit


def test_the_metrics_endpoint_serves_each_status_number_in_its_metrics_unit_and_nothing_for_none():
    from dimster.coordinator.control.exporter import StatusExporter

    exporter = StatusExporter({"run": "r1"})
    try:
        exporter.update({"e2eP99Ms": 12.5, "e2eP50Ms": 2.0, "sent": 7, "publishP99Ms": None})
        samples = scrape(exporter.url)
    finally:
        exporter.close()
    assert samples["dimster_e2e_latency_p99_seconds"][1] == pytest.approx(0.0125)  # ms -> s
    assert samples["dimster_e2e_latency_p50_seconds"][1] == pytest.approx(0.002)
    assert samples["dimster_sent_messages_total"][1] == 7
    assert not any(name.startswith("dimster_publish_latency") for name in samples)  # not known: no series


def test_the_metrics_endpoint_serves_the_status_schema_with_the_run_labels(tmp_path):
    from dimster.coordinator.control.exporter import StatusExporter
    from dimster.coordinator.control.status_schema import FIELDS

    exporter = StatusExporter({"environment": "test", "run": "r1", "workload": "w", "mode": "steady"})
    try:
        c = coordinator(tmp_path, FakeWorkers(), exporter=exporter)
        assert c.run() == 0
        samples = scrape(exporter.url)
        totals = json.loads((c.bundle.path / "run.json").read_text())["totals"]
        assert samples["dimster_sent_messages_total"][1] == totals["sent"] > 0
        assert samples["dimster_received_messages_total"][1] == totals["received"]
        per_client = [s for s in scrape_samples(exporter.url) if s.name == "dimster_client_received_messages_total"]
        assert sum(s.value for s in per_client) == totals["received"]  # the series per kind of client add up
        assert samples["dimster_lost_messages"][1] == totals["lost"] == 0  # known at the end, exported then
        status = c.status()
        # every number of the final status, in the metric's unit, and no series for a field the status has
        # no value for (the last console window's latencies, after a drain a slow host stretched past a line)
        for field in FIELDS:
            value = status.get(field.name)
            if field.name == "elapsedSeconds":  # its clock moved on since the endpoint's last update
                continue
            if value is None:
                assert field.metric not in samples, field.name
            else:  # a plain number: anything else the endpoint would leave out silently
                assert isinstance(value, int | float) and not isinstance(value, bool), (field.name, value)
                assert samples[field.metric][1] == pytest.approx(value * field.scale), field.name
        assert samples["dimster_backlog_messages"][1] == status["backlog"]
        labels = samples["dimster_sent_messages_total"][0]
        assert labels == {"environment": "test", "run": "r1", "workload": "w", "mode": "steady"}
        assert status["metricsUrl"] == exporter.url
        figures = status["figures"]  # the same numbers under the thresholds' names
        assert (figures["e2e.p99"], figures["sent"], figures["lost"]) == (status["e2eP99Ms"], totals["sent"], 0)
        assert (figures["consumed.rate"], figures["lock_timeouts"]) == (status["consRate"], status["lockTimeouts"])
        assert "in_doubt" not in figures and "backlog.max" not in figures  # no value now; the run's maximum
        assert figures["backlog.end"] == status["backlog"]
    finally:
        exporter.close()
    exporter.thread.join(120)  # closed: its serving thread ends and its port answers no more
    assert not exporter.thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(exporter.server.server_address[:2], timeout=5).close()
    # Prometheus naming: counters end in _total, every other name carries its unit or is a count
    assert len({f.metric for f in FIELDS}) == len(FIELDS)
    assert all(f.metric.endswith("_total") == (f.kind == "counter") for f in FIELDS)


def test_the_endpoint_has_counters_and_latency_histograms_per_kind_of_client():
    import numpy as np

    from dimster.coordinator.control.client_series import LADDER_SECONDS
    from dimster.coordinator.control.exporter import StatusExporter
    from dimster.metrics.histogram import Histogram
    from dimster.worker.protocol import ClientInterval

    e2e_us = np.array([150, 900, 1_000, 1_100, 40_000, 3_000_000], dtype=float)  # 0.15 ms .. 3 s
    histogram = Histogram()
    histogram.record_array(e2e_us)
    stats = {"tx_requests": 10.0, "batch_records_avg": 4.0, "request_latency_avg_ms": 25.0}

    def report(worker, received):
        return worker_report(
            worker,
            100.0,
            [
                ClientInterval("p0", "producer", "t", library="java", sent=7, acked=6, client_stats=stats),
                ClientInterval("c9", "share_consumer", "t", "g", library="librdkafka", max_poll_records=500),
                ClientInterval(
                    "c0",
                    "share_consumer",
                    "t",
                    "g",
                    library="librdkafka",
                    received=received,
                    polls=2,
                    max_poll_records=3,
                ),
            ],
            histograms=HistogramColumns.gather(
                [{}, {}, {("e2e", 0): histogram.to_wire(), ("warmup_e2e", 1): histogram.to_wire()}]
            ),
        )

    exporter = StatusExporter({"run": "r1"})
    try:
        exporter.add(report(0, received=5))
        exporter.add(report(0, received=4))
        exporter.add(report(1, received=1))
        samples = scrape_samples(exporter.url)
    finally:
        exporter.close()

    def values(name, **labels):
        return [s.value for s in samples if s.name == name and labels.items() <= s.labels.items()]

    assert values("dimster_client_received_messages_total", worker="0", role="share_consumer", group="g") == [9]
    assert values("dimster_client_received_messages_total", worker="1") == [1]
    assert all(s.labels["run"] == "r1" for s in samples if s.name.startswith("dimster_client_"))  # the run's too
    assert values("dimster_client_sent_messages_total", worker="0", role="producer", client_library="java") == [14]
    assert values("dimster_client_polls_total", worker="0") == [4]
    assert values("dimster_client_max_records_per_poll", worker="0") == [500]  # the most of c0 and c9
    assert values("dimster_client_requests_total", worker="0", role="producer") == [10.0]  # latest, not summed
    assert values("dimster_producer_batch_records_avg", worker="0") == [4.0]
    assert values("dimster_client_request_latency_seconds_avg", worker="0") == [0.025]  # ms to s
    # e2e: measured and warm-up, both partitions, two reports on worker 0 = 4 x each value, in seconds
    buckets = {
        s.labels["le"]: s.value
        for s in samples
        if s.name == "dimster_e2e_latency_seconds_bucket" and s.labels["worker"] == "0"
    }
    assert len(buckets) == len(LADDER_SECONDS) + 1 and buckets["+Inf"] == 4 * len(e2e_us)
    for le, count in buckets.items():
        bound = float(le)  # a dimster bucket edge within 1 % of the ladder's value
        assert count == 4 * int((e2e_us <= bound * 1e6).sum()), le
    assert values("dimster_e2e_latency_seconds_count", worker="0") == [4 * len(e2e_us)]
    assert values("dimster_e2e_latency_seconds_sum", worker="0")[0] == pytest.approx(4 * e2e_us.sum() / 1e6, rel=0.01)


def test_a_metrics_port_in_use_is_one_line():

    from dimster.coordinator.control.exporter import StatusExporter

    with busy_port() as port, pytest.raises(DimsterError, match=rf"cannot listen on 127.0.0.1:{port}"):
        StatusExporter({}, port=port)


@pytest.mark.unit
def test_the_console_line_reads_the_status_schema():
    from dimster.coordinator.control.console import POLLS, SEGMENTS, field_names, status_line
    from dimster.coordinator.control.status_schema import NAMES

    assert {name for segment in (*SEGMENTS, POLLS) for name in field_names(segment)} <= set(NAMES)
    window = {
        "pubRate": 1000.0,
        "consRate": 998.4,
        "targetRate": 1000.0,
        "pubRate10s": 1000.0,
        "sent": 12_345,
        "received": 12_300,
        "backlog": 45,
        "e2eP50Ms": 5.06,
        "e2eP99Ms": None,
        "publishP99Ms": 20.0,
        "recordsPerPoll": 6.25,
        "maxPollRecords": 40,
        "sendErrors": 0,
        "duplicates": 2,
    }
    assert status_line(12.0, "measure", window) == (
        "[    12s measure] pub     1,000 msg/s | cons       998 msg/s | sent      12,345 | recv      12,300 | "
        "backlog        45 | e2e p50 5.1 ms p99 - | pub p99 20.0 ms | poll avg 6.2 max 40  !! 2 duplicates"
    )
    assert status_line(12.0, "measure", window, planned=60.0).startswith("[    12s/60s measure] pub     1,000 msg/s")


@pytest.mark.unit
def test_the_console_gives_the_planned_seconds_of_a_run_whose_length_is_known():
    from dimster.workload.model import parse_workload
    from dimster.workload.modes import plan_for
    from dimster.workload.modes.base import planned_seconds

    def planned(**keys) -> float | None:
        workload = parse_workload({"name": "w", "warmupSeconds": 10, "durationSeconds": 50, **keys}, "w.yaml")
        return planned_seconds(plan_for(workload), workload)

    assert planned() == 60 and planned(mode="correctness") == 60 and planned(mode="max-rate") == 60
    assert planned(durationSeconds=0) is None  # runs until stopped
    assert planned(mode={"type": "explore-limits", "targetE2eP99Ms": 100}) is None  # ends when it has found
    assert planned(mode={"type": "drain-backlog", "backlogRecords": 1000}) is None


@pytest.mark.unit
def test_the_console_warns_when_a_workers_threads_waited_to_run():
    """Worker 1's probe waited 0.3 of its 2 s, worker 0's 0.02 of 2 s: the window's share is the larger,
    and worker 1, saturated, is warned of while load runs (diagnosis/generator.py)."""
    from dimster.coordinator.account.aggregate import RunAggregate
    from dimster.coordinator.control.console import warnings
    from dimster.worker.protocol import WakeLag

    aggregate = RunAggregate({})
    aggregate.load_started = 100.0
    for end in (101.0, 102.0):
        aggregate.add(worker_report(0, end, [], wake_lag=WakeLag(wakes=98, lag_ms_sum=10.0, lag_ms_max=1.0)))
        aggregate.add(worker_report(1, end, [], wake_lag=WakeLag(wakes=70, lag_ms_sum=150.0, lag_ms_max=40.0)))
    window = aggregate.take_window()
    assert window["workerWaitShare"] == pytest.approx(0.15)
    status = {**window, "targetRate": 0}
    assert [w["worker"] for w in window["generator"]] == [1]
    assert warnings("measure", status) == [
        "the load generator is saturated (worker 1: its threads waited 15% of the time to run): latencies "
        "and rates include dimster's own wait, not only Kafka's (more workers (--workers N, or workers: N in "
        "the environment), fewer clients a worker, clientLibrary librdkafka where it serves)"
    ]
    assert warnings("measure", {**status, "generator": []}) == []
    assert warnings("drain", status) == []
    assert aggregate.take_window()["workerWaitShare"] is None  # a window without reports


@pytest.mark.unit
def test_client_statistics_leave_out_quiet_clients_and_survive_rebuilds():
    from dimster.clients import STATS_INTERVAL_S
    from dimster.coordinator.control.client_series import ClientSeries
    from dimster.worker.protocol import ClientInterval

    def producer(client_id, batch_records, requests):
        stats = {"batch_records_avg": batch_records, "tx_requests": requests}
        return ClientInterval(client_id, "producer", "t", library="java", client_stats=stats)

    series = ClientSeries({"run": "r"})
    series.add(worker_report(0, 100.0, [producer("p0", 2.0, 5.0), producer("p1", 4.0, 5.0)]))
    series.add(worker_report(0, 101.0, [producer("p1", 4.0, 7.0)]))
    series.add(worker_report(0, 100.0 + 3 * STATS_INTERVAL_S, [producer("p1", 8.0, 1.0)]))  # p0 removed, p1 rebuilt
    families = {f.name: f for f in series.collect()}
    [batch] = families["dimster_producer_batch_records_avg"].samples
    assert batch.value == 8.0 and batch.labels["run"] == "r"
    # a counter never goes back: p0's 5 requests stay, and p1's 7 before its rebuild count beside its new 1
    [requests] = families["dimster_client_requests"].samples
    assert requests.value == 5 + 7 + 1


@pytest.mark.unit
def test_the_broker_scraper_lines_brokers_up_and_notes_one_that_does_not_answer_once(monkeypatch):
    from prometheus_client import CollectorRegistry, Gauge, start_http_server

    from dimster.coordinator.observers import broker_scrape
    from dimster.coordinator.observers.broker_scrape import BrokerScraper

    monkeypatch.setattr(broker_scrape, "TIMEOUT", 1.0)  # broker 3 never answers: each round waits this long

    servers, urls = [], {}
    for broker in (1, 2):
        registry = CollectorRegistry()
        Gauge("kafka_server_underreplicatedpartitions", "", registry=registry).set(broker)
        Gauge("some_other_series", "", registry=registry).set(1)  # not kept
        server, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
        servers.append(server)
        urls[broker] = f"http://127.0.0.1:{server.server_port}/metrics"
    with busy_port() as port:  # listens, but never answers HTTP
        urls[3] = f"http://127.0.0.1:{port}/metrics"
        delivered, notes = [], []
        scraper = BrokerScraper(urls, lambda at, broker, samples: delivered.append((at, broker, samples)), notes.append)
        scraper.scrape_once()
        scraper.scrape_once()
    for server in servers:
        server.shutdown()
        server.server_close()
    assert [broker for _, broker, _ in delivered] == [1, 2, 1, 2]
    assert delivered[0][0] == delivered[1][0] != delivered[2][0]  # one time per round
    assert delivered[1][2] == [("kafka_server_underreplicatedpartitions", {}, 2.0)]
    assert len(notes) == 1 and "broker 3" in notes[0]  # said once, not at every round


@pytest.mark.unit
def test_the_broker_scraper_tells_an_answer_that_is_not_an_exporters_and_raises_its_own_bug(monkeypatch):
    """An endpoint answering what is not Prometheus's text is said so (not "does not answer"); a bug
    in reading the samples (a TypeError planted in parse_samples) is raised, not noted as the broker's."""
    import http.server

    from dimster.coordinator.observers import broker_scrape

    class Garbage(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"kafka_x{broker=1 2\n")  # a label set never closed

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        notes: list[str] = []
        urls = {1: f"http://127.0.0.1:{server.server_port}/metrics"}
        scraper = broker_scrape.BrokerScraper(urls, lambda *_: None, notes.append)
        scraper.scrape_once()
        assert len(notes) == 1 and "answer what is not Prometheus's text format" in notes[0], notes

        def broken(text):
            raise TypeError("planted")

        monkeypatch.setattr(broker_scrape, "parse_samples", broken)
        with pytest.raises(TypeError, match="planted"):
            broker_scrape.BrokerScraper(urls, lambda *_: None, notes.append).scrape_once()
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.unit
def test_the_broker_scraper_warms_each_exporter_up_once_keeps_nothing_of_it_and_never_asks_twice_at_once(
    monkeypatch,
):
    """The scrapes after the baseline come an hour apart here: a thread of the niced unit tier may wait
    seconds for a CPU, and a second round 5 s on would be a third answer."""
    import http.server

    from dimster.coordinator.observers import broker_scrape
    from dimster.coordinator.observers.broker_scrape import BrokerScraper

    monkeypatch.setattr(broker_scrape, "SCRAPE_EVERY", 3600.0)

    asked: dict[int, int] = {}  # port -> requests answered
    busy: dict[int, int] = {}  # port -> requests in progress
    most_at_once = []

    class Exporter(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            port = self.server.server_port
            busy[port] = busy.get(port, 0) + 1
            most_at_once.append(busy[port])
            time.sleep(0.3 if port not in asked else 0)  # a fresh exporter's first answer is slow
            asked[port] = asked.get(port, 0) + 1
            busy[port] -= 1
            body = b"kafka_server_underreplicatedpartitions 0\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Exporter) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    urls = {i + 1: f"http://127.0.0.1:{s.server_port}/metrics" for i, s in enumerate(servers)}
    delivered, notes = [], []
    scraper = BrokerScraper(urls, lambda at, broker, samples: delivered.append(broker), notes.append)
    try:
        scraper.warm_up()
        scraper.start()  # load starts while the warm-up is still waiting for its first answer
        until(lambda: len(delivered) >= 2, every=0.01)
        scraper.stopped.set()
        scraper.thread.join(120)
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
    assert asked == {s.server_port: 2 for s in servers}  # the warm-up's answer, then the baseline
    assert max(most_at_once) == 1
    assert delivered == [1, 2] and notes == []  # only the baseline was kept
