"""The Spark summary on real PySpark: percentiles from merged histograms match exact ones within the
histogram's error bound; partial run folders summarize what exists; a non-run folder is refused."""

import json

import numpy as np
import pandas as pd
import psutil
import pytest

from dimster.metrics.client_stats import COLUMNS
from dimster.metrics.histogram import ALPHA
from dimster.pipeline.client_tables import queued_request_notes
from dimster.pipeline.latency import QUANTILES
from dimster.pipeline.spark import DRIVER_JAVA_OPTS, spark_session
from dimster.pipeline.summary import summarize
from dimster.results.metrics_writer import MetricsWriter
from dimster.results.omb_result import omb_result
from dimster.worker.protocol import ClientInterval, worker_report
from tests.conftest import dimster
from tests.synthetic import START, exact_percentile, synthetic_run


@pytest.mark.spark
def test_spark_percentiles_match_exact_ones_within_the_bound(tmp_path, spark):
    samples = synthetic_run(tmp_path)
    summary = summarize(tmp_path, spark)
    everything = np.concatenate(list(samples.values()))
    overall = summary["latency_ms"]["e2e"]
    assert overall["count"] == len(everything)
    for name, (num, den) in QUANTILES.items():
        exact_ms = exact_percentile(everything, num, den) / 1000
        assert overall[name] == pytest.approx(exact_ms, rel=ALPHA), name
    assert overall["max"] == pytest.approx(everything.max() / 1000)
    shape = {"messageSize": 100, "topics": 1, "partitionsPerTopic": 3, "producersPerTopic": 1, "consumersPerGroup": 1}
    (tmp_path / "workload.yaml").write_text(json.dumps(shape))  # omb-result.json's figures are summary.json's
    omb = omb_result(tmp_path, "synthetic", "Kafka")
    same = {"50pct": "p50", "75pct": "p75", "95pct": "p95", "99pct": "p99", "999pct": "p99_9", "9999pct": "p99_99"}
    for omb_name, name in {**same, "Max": "max"}.items():
        assert omb[f"aggregatedEndToEndLatency{omb_name}"] == pytest.approx(overall[name], rel=1e-9), name

    per_client = json.loads((tmp_path / "summary" / "summary.json").read_text())  # written too
    assert per_client["latency_ms"]["e2e"]["count"] == len(everything)
    import pandas as pd

    clients = pd.read_csv(tmp_path / "summary" / "latency_per_client.csv")
    c1 = clients[(clients.client_id == "c1") & (clients.metric == "e2e")].iloc[0]
    assert c1["p99"] == pytest.approx(exact_percentile(samples["c1"], 99, 100) / 1000, rel=ALPHA)
    partitions = pd.read_csv(tmp_path / "summary" / "latency_per_partition.csv")
    assert sorted(partitions.partition) == [0, 1, 2]  # consumer c owns partition c in this run
    per_second = pd.read_csv(tmp_path / "summary" / "latency_per_second.csv")
    assert len(per_second[per_second.metric == "e2e"]) == 20

    throughput = summary["throughput"]
    assert throughput["seconds"] == 20
    assert throughput["produced_msgs_per_s"] == pytest.approx(12_000)
    assert throughput["consumed_msgs_per_s"] == pytest.approx(12_000)
    assert summary["delivery_counts"] == {1: 20 * 3 * 3995, 2: 20 * 3 * 5}
    assert summary["polls"]["max_records_in_a_poll"] == 120
    backlog = pd.read_csv(tmp_path / "summary" / "throughput_per_second.csv").backlog
    assert (backlog == 0).all()
    for table in ("throughput_per_second", "latency_per_second", "delivery_counts"):
        assert (tmp_path / "summary" / f"{table}.parquet").exists()


@pytest.mark.spark
def test_partial_run_folder_summarizes_what_exists(tmp_path, spark):
    synthetic_run(tmp_path, seconds=5)
    (tmp_path / "run.json").unlink()
    for part in (tmp_path / "metrics" / "histograms").iterdir():
        part.unlink()
    whole = sorted((tmp_path / "metrics" / "intervals").glob("*.parquet"))[0].read_bytes()
    (tmp_path / "metrics" / "intervals" / "part-99999.parquet").write_bytes(whole[: len(whole) // 2])  # cut short
    summary = summarize(tmp_path, spark)
    assert json.loads((tmp_path / "summary" / "summary.json").read_text()) == json.loads(json.dumps(summary))
    assert "run.json is missing: versions, totals and status unknown" in summary["notes"]
    assert "metrics/histograms is missing" in summary["notes"]
    [cut] = [note for note in summary["notes"] if "part-99999" in note]
    assert cut.startswith("intervals/part-99999.parquet is unreadable and left out")
    assert summary["throughput"]["seconds"] == 5


@pytest.mark.unit
def test_folder_that_is_not_a_run_is_refused(tmp_path):
    result = dimster("summarize", str(tmp_path))
    assert result.code == 2
    assert result.error_lines == [f"dimster: error: {tmp_path} is not a dimster run folder (no run.json, no metrics/)"]
    assert "Traceback" not in result.stderr


@pytest.mark.spark
def test_throughput_counts_the_time_each_worker_reports_covered(tmp_path, spark):
    """Two workers at 1,000 msg/s each, reporting every second at their own offsets, after a warm-up;
    the load stops 0.4 s into a second: 2,000 msg/s, not less for a last second only partly filled."""
    writer = MetricsWriter(tmp_path / "metrics", START)
    for worker, offset in ((0, 0.3), (1, 0.7)):
        ends = [START + offset + second for second in range(10)] + [START + 10.4]
        previous = START
        for end in ends:
            covered = end - previous
            phase = "warmup" if end <= START + 2 else "measure"
            producer = ClientInterval(client_id=f"p{worker}", role="producer", topic="t", sent=round(1000 * covered))
            consumer = ClientInterval(
                client_id=f"c{worker}", role="consumer", topic="t", group="g", received=round(900 * covered)
            )
            writer.add(worker_report(worker, end, [producer, consumer]), phase)
            previous = end
    writer.flush()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "status": "completed", "load_started": START}))
    throughput = summarize(tmp_path, spark)["throughput"]
    assert throughput["produced_msgs_per_s"] == pytest.approx(2000, rel=0.001)
    assert throughput["consumed_msgs_per_s"] == pytest.approx(1800, rel=0.001)
    assert throughput["seconds"] == pytest.approx(10.4 - 1.3)  # worker 0: from its last warm-up report


@pytest.mark.spark
def test_the_brokers_metrics_are_summarized_per_broker_across_a_restart(tmp_path, spark):
    """Two brokers scraped every 5 s; broker 1 restarts mid-run (its counters start again)."""
    synthetic_run(tmp_path, seconds=4, consumers=1, per_second=100)
    info = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**info, "groups": {"g": "t"}}))
    writer = MetricsWriter(tmp_path / "metrics", START)
    produce = {1: [0, 500, 1000, 100, 600], 2: [0, 250, 500, 750, 1000]}  # broker 1 restarted at 15 s
    for scrape in range(5):
        at = START + 5 * scrape
        for broker in (1, 2):
            samples = [
                ("kafka_network_requests_total", {"request": "Produce", "version": "11"}, produce[broker][scrape]),
                (
                    "kafka_network_request_totaltime_seconds",
                    {"request": "Produce", "percentile": "0.99"},
                    (scrape + 1) / 100,  # 10 ms, 20 ms, ...
                ),
                ("kafka_server_purgatory_purgatorysize", {"operation": "ShareFetch"}, float(broker + 1)),
                ("kafka_server_share_record_acknowledgements_total", {"ack_type": "Accept"}, 1000.0 * scrape),
                (
                    "kafka_server_share_partition_in_flight_messages",
                    {"group": "g", "topic": "t", "partition": "0"},
                    7.0,
                ),
                (
                    "kafka_server_share_partition_in_flight_messages",
                    {"group": "old", "topic": "o", "partition": "0"},
                    9.0,
                ),
            ]
            writer.add_broker_samples(at, broker, samples, "measure")
    writer.flush()
    brokers = summarize(tmp_path, spark)["brokers"]
    produce_rates = {r["broker"]: r for r in brokers["requests"] if r["request"] == "Produce"}
    assert produce_rates[1]["requests_per_s"] == pytest.approx((500 + 500 + 100 + 500) / 20)  # not (600 - 0) / 20
    assert produce_rates[2]["requests_per_s"] == pytest.approx(1000 / 20)
    assert produce_rates[1]["p99_ms"] == 30.0 and produce_rates[1]["p99_ms_max"] == 50.0  # median and largest, in ms
    assert brokers["share"]["acknowledgements_per_s"]["Accept"] == pytest.approx(2 * 4000 / 20)
    assert [(p["broker"], p["size_max"]) for p in brokers["purgatory"]] == [(1, 2.0), (2, 3.0)]
    assert [(p["group"], p["max"]) for p in brokers["share"]["in_flight_messages"]] == [("g", 7.0)]  # the run's


@pytest.mark.spark
def test_the_groups_lag_and_account_reach_the_summary_and_the_report(tmp_path, spark):
    """The brokers' lag every 5 s beside dimster's backlog; the account and the lock counts from run.json."""
    from dimster.kafka.groups import LagSample
    from dimster.report.html import write_report

    synthetic_run(tmp_path, seconds=4, consumers=1, per_second=100)
    info = json.loads((tmp_path / "run.json").read_text())
    account = {"g": {"acked": 400, "accepted": 390, "rejected": 4, "archived": 5, "unconsumed": 3, "in_doubt": 0,
                     "lost": 0, "closes": False, "unaccounted": -2}}  # fmt: skip
    totals = {**info["totals"], "archived": 5, "renewed": 12, "lock_timeouts": 7}
    thresholds = ["brokerLag.max < 1000", "brokerLag.end > 0", "e2e.p99 < 1s", {"threshold": "lost == 0"}]
    final = {**info.get("final_workload", {}), "thresholds": thresholds}
    info |= {"groups": {"g": "t"}, "account": account, "totals": totals, "final_workload": final}
    (tmp_path / "run.json").write_text(json.dumps(info))
    writer = MetricsWriter(tmp_path / "metrics", START)
    # (brokers' lag, dimster's backlog, phase): the warm-up's start-up lag is no measured figure
    lags = [(5000, 4000, "warmup")] + [(lag, b, "measure") for lag, b in [(120, 100), (300, 300), (40, 35), (0, 0)]]
    for i, (lag, backlog, phase) in enumerate(lags):
        sample = LagSample(START + 5 * i, {"g": {0: (10 * i, lag - lag // 2), 1: (0, lag // 2)}})
        writer.add_group_lag(sample, {"g": backlog}, phase)
    writer.flush()
    summary = summarize(tmp_path, spark)
    assert summary["broker_lag"] == {"g": {"end": 0, "max": 5000, "backlog_max": 4000}}
    assert summary["broker_lag_total"] == {"max": 300, "end": 0, "readings": 4}
    verdict = summary["verdict"]
    assert [r["passed"] for r in verdict["thresholds"]] == [True, False, True, True] and not verdict["passed"]
    assert [r["value"] for r in verdict["thresholds"]] == [300, 0, summary["latency_ms"]["e2e"]["p99"], 0]
    assert verdict["thresholds"][2]["bound"] == 1000.0 and verdict["thresholds"][2]["unit"] == "ms"
    assert summary["account"] == account
    assert summary["share_outcomes"]["archived"] == 5 and summary["share_outcomes"]["lock_timeouts"] == 7
    table = pd.read_csv(tmp_path / "summary" / "broker_lag.csv")
    assert table.lag.tolist() == [lag for lag, _, _ in lags] and table.backlog.tolist() == [b for _, b, _ in lags]
    page = write_report(tmp_path).read_text()
    assert "brokers&#x27; lag" in page or "brokers' lag" in page
    assert "no (-2)" in page and "archived by the broker" in page


@pytest.mark.spark
def test_compression_ratio_is_the_payload_over_the_bytes_the_brokers_took_in_for_the_runs_topics(tmp_path, spark):
    """10 MB of payload, warm-up included; broker 1 counts 2.5 MB for the run's topic across a restart
    (its counter starts again), broker 2 leads nothing of it; another topic's bytes do not count."""
    writer = MetricsWriter(tmp_path / "metrics", START)
    for second in range(1, 11):
        producer = ClientInterval(client_id="p0", role="producer", topic="t", sent_bytes=1_000_000)
        writer.add(worker_report(0, START + second, [producer]), "warmup" if second <= 2 else "measure")
    counted = {1: [300_000, 1_500_000, 200_000, 1_000_000], 2: []}  # 300k + 1.2M + 200k (restart) + 800k
    for scrape, value in enumerate(counted[1]):
        at = START + 3 * scrape
        samples = [
            ("kafka_server_topic_bytesin_total", {"topic": "t"}, float(value)),
            ("kafka_server_topic_bytesin_total", {"topic": "old"}, 9e9),
        ]
        writer.add_broker_samples(at, 1, samples, "measure")
        writer.add_broker_samples(at, 2, [("kafka_server_topic_bytesin_total", {"topic": "old"}, 9e9)], "measure")
    writer.flush()
    info = {"run_id": "r", "status": "completed", "load_started": START, "topics": ["t"]}
    (tmp_path / "run.json").write_text(json.dumps(info))
    compression = summarize(tmp_path, spark)["compression"]
    assert compression["payload_bytes"] == 10_000_000 and compression["broker_bytes_in"] == 2_500_000
    assert compression["ratio"] == pytest.approx(4.0)
    assert compression["producer_compression_rate_avg"] is None  # no Java producer statistics
    # a run that died before run.json named its topics: its producers' topic counts
    (tmp_path / "run.json").write_text(json.dumps({**info, "status": "failed", "topics": None}))
    assert summarize(tmp_path, spark)["compression"]["ratio"] == pytest.approx(4.0)


@pytest.mark.spark
def test_records_per_fetch_counts_the_records_of_the_reports_the_fetch_counters_cover(tmp_path, spark):
    """A consumer receives 100 records a second for 20 s; its statistics come every 5 s from second 5
    to second 15, with 10 fetches a second and 1.5 network bytes per consumed byte. Its records per
    fetch is 10 and its bytes fetched per byte consumed 1.5: the first 5 s and the last 5 s, which no
    counter change covers, count neither fetches nor records."""
    writer = MetricsWriter(tmp_path / "metrics", START)
    for second in range(1, 21):
        stats = None
        if second in (5, 10, 15):
            stats = dict.fromkeys(COLUMNS, 0.0) | {"requests_fetch": 10.0 * second, "rx_bytes": 75_000.0 * second}
        consumer = ClientInterval(client_id="c0", role="consumer", topic="t", group="g", client_stats=stats)
        consumer.received, consumer.received_bytes = 100, 50_000
        writer.add(worker_report(0, START + second, [consumer]), "measure")
    writer.flush()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "status": "completed", "load_started": START}))
    ratios = summarize(tmp_path, spark)["client_stats"]
    assert ratios["consumer_fetch_requests"] == 100
    assert ratios["records_per_fetch"] == pytest.approx(10.0)
    assert ratios["rx_bytes_per_consumed_byte"] == pytest.approx(1.5)
    table = pd.read_csv(tmp_path / "summary" / "client_stats.csv")
    assert table.records_consumed.tolist() == [2000] and table.records_covered.tolist() == [1000]


@pytest.mark.spark
def test_the_clients_own_latencies_are_averaged_over_the_measured_phase(tmp_path, spark):
    """Two producers report their queue time and request latency every 5 s, each the average since
    their previous report: 1,000 ms in warm-up (a cold start), 500 ms in the measured phase's first
    report (its 5 s began in warm-up), then 2 and 4 ms (p0), 6 and 8 ms (p1). A consumer reports a
    10 ms request latency. The summary averages the reports whose 5 s lie in the measured phase; a
    report without a figure (0) does not count."""
    writer = MetricsWriter(tmp_path / "metrics", START)
    figures = {"p0": [(1000, 1000), (500, 500), (0, 0), (2, 4)], "p1": [(1000, 1000), (500, 500), (6, 8), (6, 8)]}
    for step in range(4):
        phase = "warmup" if step == 0 else "measure"
        clients = []
        for client_id, steps in figures.items():
            queue, request = steps[step]
            stats = dict.fromkeys(COLUMNS, 0.0) | {"queue_time_avg_ms": queue, "request_latency_avg_ms": request}
            clients.append(ClientInterval(client_id=client_id, role="producer", topic="t", client_stats=stats))
        stats = dict.fromkeys(COLUMNS, 0.0) | {"request_latency_avg_ms": 10.0}
        clients.append(ClientInterval(client_id="c0", role="consumer", topic="t", group="g", client_stats=stats))
        writer.add(worker_report(0, START + 5 * (step + 1), clients), phase)
    writer.flush()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "status": "completed", "load_started": START}))
    ratios = summarize(tmp_path, spark)["client_stats"]
    assert ratios["producer_queue_time_ms_avg"] == pytest.approx((2 + 6) / 2)
    assert ratios["producer_request_latency_ms_avg"] == pytest.approx((4 + 8) / 2)
    assert ratios["consumer_request_latency_ms_avg"] == pytest.approx(10.0)
    table = pd.read_csv(tmp_path / "summary" / "client_stats.csv").set_index("client_id")
    assert table.loc["p0", "queue_time_avg_ms"] == pytest.approx(2.0) and pd.isna(table.loc["c0", "queue_time_avg_ms"])


@pytest.mark.unit
def test_producer_requests_far_slower_than_the_brokers_produce_time_get_a_note():
    """The one-record requests of linger.ms 1 at 1,000 msg/s per producer: 117 ms as the producers saw
    them, 7.5 ms at p99 in the broker; at linger.ms 10 they took 1.3 ms and get no note."""
    brokers = {"requests": [{"request": "Produce", "p99_ms": 7.5}, {"request": "ShareFetch", "p99_ms": 500.0}]}
    queued = {"producer_request_latency_ms_avg": 117.6, "producer_batch_records_avg": 1.0}
    [note] = queued_request_notes(queued, brokers)
    assert note == (
        "the producers saw their requests take 118 ms on average, the brokers handled Produce in 7.5 ms at p99: "
        "the requests waited outside the brokers' handling; 1.0 records per batch: a larger linger.ms sends "
        "fewer, fuller requests"
    )
    fuller = {**queued, "producer_batch_records_avg": 10.0}
    assert queued_request_notes(fuller, brokers)[0].endswith("outside the brokers' handling")
    assert queued_request_notes({**queued, "producer_request_latency_ms_avg": 1.3}, brokers) == []
    assert queued_request_notes({**queued, "producer_request_latency_ms_avg": 30.0}, brokers) == []  # < 5 x p99
    assert queued_request_notes(queued, {"requests": [{"request": "Produce", "p99_ms": None}]}) == []
    assert queued_request_notes({"producer_request_latency_ms_avg": None}, brokers) == []  # older bundles
    slow_broker = {"requests": [{"request": "Produce", "p99_ms": 1.0}]}
    assert queued_request_notes({"producer_request_latency_ms_avg": 8.0}, slow_broker) == []  # under 10 ms


@pytest.mark.spark
def test_a_summarys_own_driver_runs_with_dimsters_java_options_and_ends_with_it(tmp_path):
    """A `local[1]` master: a driver JVM of the summary's own, which spark-submit hands dimster's options
    (the client compiler only), writing to the given log, ended (by PID) when the session ends."""
    with spark_session("local[1]", tmp_path / "spark.log") as session:
        driver = psutil.Process(session.sparkContext._gateway.proc.pid)
        assert set(DRIVER_JAVA_OPTS.split()) <= set(driver.cmdline())
        assert session.range(3).count() == 3
    assert not driver.is_running() or driver.status() == psutil.STATUS_ZOMBIE
    assert "Setting default log level" in (tmp_path / "spark.log").read_text()


@pytest.mark.spark
def test_the_brokers_dead_letter_meters_and_the_runs_dead_letter_counts_reach_the_summary_and_the_report(
    tmp_path, spark
):
    """Two brokers scraped every 5 s (the first scrape in the warm-up). Broker 1's dead-letter meters of
    group g appear at 10 s (registered at their first mark: that count is the run's), broker 2's failed
    produce request at 20 s; the Reject counter counts broker-wide (500 from earlier runs); a group of
    an earlier run is left out."""
    from dimster.report.html import write_report

    synthetic_run(tmp_path, seconds=20, consumers=1, per_second=100)  # the scrapes within its time
    info = json.loads((tmp_path / "run.json").read_text())
    found = {"dead_lettered": 98, "dead_letter_missing": 2, "dead_letter_duplicates": 0}
    queue = {"topic": "dlq.r", "copyRecord": True, "createTopic": False}
    info |= {"groups": {"g": "t"}, "totals": {**info["totals"], "rejected": 100, **found}, "deadLetterQueue": queue}
    (tmp_path / "run.json").write_text(json.dumps(info))
    meters = {  # (broker, name) -> value per scrape, None: not registered yet
        (1, "kafka_server_share_record_acknowledgements_total"): [500, 500, 540, 600, 600],
        (2, "kafka_server_share_record_acknowledgements_total"): [0, 0, 0, 0, 0],
        (1, "kafka_server_share_dead_letter_records_total"): [None, None, 40, 100, 100],
        (1, "kafka_server_share_dead_letter_produce_requests_total"): [None, None, 2, 5, 5],
        (2, "kafka_server_share_dead_letter_produce_requests_total"): [None, None, None, None, 1],
        (2, "kafka_server_share_dead_letter_failed_produce_requests_total"): [None, None, None, None, 1],
    }
    writer = MetricsWriter(tmp_path / "metrics", START)
    for scrape in range(5):
        for broker in (1, 2):
            samples = [("kafka_server_share_dead_letter_records_total", {"group": "old"}, 999.0)]
            for (b, name), values in meters.items():
                labels = {"ack_type": "Reject"} if "acknowledgements" in name else {"group": "g"}
                if b == broker and values[scrape] is not None:
                    samples.append((name, labels, float(values[scrape])))
            writer.add_broker_samples(START + 5 * scrape, broker, samples, "warmup" if scrape == 0 else "measure")
    writer.flush()
    summary = summarize(tmp_path, spark)
    share = summary["brokers"]["share"]
    measured = 15  # seconds from the first measured scrape to the last
    assert share["dead_letters"] == {
        "g": {
            "records": 100, "records_per_s": pytest.approx(100 / measured),
            "produce_requests": 6, "produce_requests_per_s": pytest.approx(6 / measured),
            "failed_produce_requests": 1, "failed_produce_requests_per_s": pytest.approx(1 / measured),
        }
    }  # fmt: skip
    assert share["acknowledgements_per_s"]["Reject"] == pytest.approx(100 / measured)
    assert {key: summary["share_outcomes"][key] for key in found} == found
    assert summary["dead_letter_queue"] == queue
    table = pd.read_csv(tmp_path / "summary" / "broker_share_records.csv")
    per_round = {(m, k): rows.per_s.tolist() for (m, k), rows in table.groupby(["meter", "key"])}
    assert per_round == {  # per second since the previous scrape, summed over brokers; 0 before the first mark
        ("acknowledged", "Reject"): [0.0, 8.0, 12.0, 0.0],
        ("records", "g"): [0.0, 8.0, 12.0, 0.0],
        ("produce_requests", "g"): [0.0, 0.4, 0.6, 0.2],
        ("failed_produce_requests", "g"): [0.0, 0.0, 0.0, 0.2],
    }
    assert table[table.meter == "records"].run_time_s.tolist() == [5.0, 10.0, 15.0, 20.0]
    page = write_report(tmp_path).read_text()
    for drawn in ("records acknowledged per second by type", "dead-lettered g", "failed g", "<td>the record</td>"):
        assert drawn in page
    assert '<div class="card bad"><div class="label">dead_lettered</div><div class="value">98</div>' in page
