"""The campaign summary on real PySpark and campaign.html: a 2 x 2 campaign repeated twice, whose runs'
metrics are written by dimster's own writer from known counts and latencies, summarizes to the
numbers worked out here by hand; a failed run is a note; the page is offline and charts every key
number against every dimension."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dimster.errors import DimsterError
from dimster.metrics.client_stats import COLUMNS
from dimster.metrics.histogram import ALPHA, Histogram
from dimster.pipeline.campaign_metrics import placed
from dimster.pipeline.campaign_summary import mode_fields, summarize_campaign
from dimster.report.campaign_page import write_campaign_page
from dimster.results.metrics_writer import MetricsWriter
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ClientInterval, WakeLag, worker_report
from tests.synthetic import START, exact_percentile

MODE_KEY = "kafkaConfig.shareConsumerConfig.share.acquire.mode"
SIZE = 200  # bytes per message
MEASURED = 4  # measured seconds per run, after one warm-up second
# (point, repeat) -> messages produced per second in the measured phase; consumers get 10 fewer
RATES = {(1, 1): 1000, (1, 2): 1200, (2, 1): 1500, (2, 2): 1510, (3, 1): 2000, (3, 2): 2600, (4, 1): 3000}
POINT_VALUES = {
    1: {MODE_KEY: "batch_optimized", "consumersPerGroup": 1, "partitionsPerTopic": 1},
    2: {MODE_KEY: "batch_optimized", "consumersPerGroup": 2, "partitionsPerTopic": 2},
    3: {MODE_KEY: "record_limit", "consumersPerGroup": 1, "partitionsPerTopic": 1},
    4: {MODE_KEY: "record_limit", "consumersPerGroup": 2, "partitionsPerTopic": 2},
}
FAILURE = "the cluster did not come up"
# the runs with a dead-letter queue -> (dead_lettered, dead_letter_duplicates); the others have none
DEAD_LETTERS = {(3, 1): (20, 0), (3, 2): (26, 1), (4, 1): (30, 0)}
KEY_METRICS = 5  # consumed and produced msg/s, e2e p50 and p99, publish p99
CPU_PER_MB = {"producer": 0.05, "consumer": 0.1}  # CPU seconds per MB of each role's worker
BYTES_IN = "kafka_server_topic_bytesin_total"


def compression(point: int, repeat: int) -> float:
    """The payload bytes of a run over the bytes its brokers took in: a figure of its own per run."""
    return 1 + point + repeat / 2


def histogram(values: np.ndarray) -> tuple:
    h = Histogram()
    h.record_many(values)
    return h.to_wire()


def write_bundle(folder: Path, rate: int, seed: int, waited: float, ratio: float) -> dict[str, np.ndarray]:
    """A run of one producer and one consumer: a warm-up second (10x the load, 50x slower records),
    then MEASURED seconds of `rate` msg/s produced and rate - 10 consumed, the consumer's worker's
    threads waiting to run `waited` of each second; two brokers take in the payload over `ratio`, half
    each, and broker 2 restarts after second 2 (its counter starts again). Returns the measured e2e and
    publish latencies (us)."""
    rng = np.random.default_rng(seed)
    writer = MetricsWriter(folder / "metrics", START)
    measured: dict[str, list] = {"e2e": [], "publish": []}
    taken_in = {1: 0.0, 2: 0.0}
    for second in range(MEASURED + 1):
        phase, scale = ("warmup", 10) if second == 0 else ("measure", 1)
        if second == 3:
            taken_in[2] = 0.0
        for broker in taken_in:
            taken_in[broker] += rate * scale * SIZE / ratio / 2
            other = {"topic": "other"}  # a topic of another run: not this one's
            samples = [(BYTES_IN, {"topic": "t"}, taken_in[broker]), (BYTES_IN, other, 1e9 * (second + 1))]
            writer.add_broker_samples(START + second + 0.7, broker, samples, phase)
        slow = 50 if phase == "warmup" else 1
        publish = rng.lognormal(7.0, 0.5, rate * scale) * slow
        e2e = rng.lognormal(8.0, 0.7, (rate - 10) * scale) * slow
        if phase == "measure":
            measured["publish"].append(publish)
            measured["e2e"].append(e2e)
        producer = ClientInterval(
            client_id="p0",
            role="producer",
            topic="t",
            target_rate=rate,
            sent=rate * scale,
            sent_bytes=rate * scale * SIZE,
            acked=rate * scale,
        )
        consumer = ClientInterval(
            client_id="c0",
            role="share_consumer",
            topic="t",
            group="g",
            received=(rate - 10) * scale,
            received_bytes=(rate - 10) * scale * SIZE,
            accepted=(rate - 10) * scale,
            # 2 fetches a second, which bring half as many bytes again as it consumes
            client_stats=dict.fromkeys(COLUMNS, 0.0)
            | {"requests_sharefetch": 2.0 * second, "rx_bytes": 1.5 * (rate - 10) * SIZE * second},
        )
        # each on a worker of its own, which spends CPU_PER_MB of its role on every MB it moves
        producer_cpu = CPU_PER_MB["producer"] * rate * scale * SIZE / 1e6
        consumer_cpu = CPU_PER_MB["consumer"] * (rate - 10) * scale * SIZE / 1e6
        publishing = HistogramColumns.gather([{("publish", -1): histogram(publish)}])
        writer.add(worker_report(0, START + second + 0.5, [producer], producer_cpu, histograms=publishing), phase)
        lag = WakeLag(wakes=90, lag_ms_sum=1000 * waited, lag_ms_max=50.0)
        latencies = HistogramColumns.gather([{("e2e", 0): histogram(e2e)}])
        writer.add(
            worker_report(1, START + second + 0.5, [consumer], consumer_cpu, wake_lag=lag, histograms=latencies), phase
        )
    writer.flush()
    return {metric: np.concatenate(parts) for metric, parts in measured.items()}


def run_json(point: int, repeat: int, rate: int) -> dict:
    dead_lettered, copies = DEAD_LETTERS.get((point, repeat), (None, None))
    return {
        "run_id": f"run-{point}-{repeat}",
        "status": "completed",
        **({"topics": ["t"]} if repeat == 1 else {}),  # a run that died has none: its producers' topics count
        "totals": {
            "sent": 14 * rate,
            "acked": 14 * rate,
            "received": 14 * (rate - 10),
            "lost": repeat - 1,
            "unconsumed": 0,
            "duplicates": 0,
            "dead_lettered": dead_lettered,
            "dead_letter_missing": None if dead_lettered is None else 0,
            "dead_letter_duplicates": copies,
        },
        "mode": {
            "type": "explore-limits",
            "limit_msgs_per_s": 0.8 * rate,
            "steps": [{"rate": rate, "kept_up": True}],
            "verdict": "limited by the consumers",
        },
    }


def campaign_point(point: int, repeat: int, **fields) -> dict:
    values = POINT_VALUES[point]
    label = ", ".join(f"{key.removeprefix('kafkaConfig.shareConsumerConfig.')}={v}" for key, v in values.items())
    return {"index": point, "repeat": repeat, "values": values, "label": label, "exit_code": 0, **fields}


def write_campaign(folder: Path) -> dict[tuple[int, int], dict[str, np.ndarray]]:
    """The campaign folder: points 1-4 twice each, point 4's second run failed. Returns each run's samples."""
    samples = {}
    points = []
    for (point, repeat), rate in RATES.items():
        # a folder name Spark writes as a URI ("%2520" for "%20", "+" as itself): each row still finds its run
        bundle = "levers 2-2 %20+é" if (point, repeat) == (2, 2) else f"levers-{point}-{repeat}"
        waited = 0.3 if (point, repeat) == (3, 1) else 0.02  # one run whose figures include the worker's wait
        ratio, seed = compression(point, repeat), 10 * point + repeat
        samples[(point, repeat)] = write_bundle(folder / bundle, rate, seed, waited, ratio)
        (folder / bundle / "run.json").write_text(json.dumps(run_json(point, repeat, rate)))
        points.append(campaign_point(point, repeat, status="completed", bundle=bundle, failure=None))
    points.append(campaign_point(4, 2, status="failed", bundle=None, exit_code=3, failure=FAILURE))
    (folder / "levers-1-1" / "report.html").write_text("<html></html>")
    campaign = {
        "name": "levers",
        "campaign_file": "run/campaigns/levers.yaml",
        "environment": "local",
        "created": 1_800_000_000.0,
        "ended": 1_800_000_600.0,
        "mode": {"type": "explore-limits"},
        "dimensions": [
            {"keys": [MODE_KEY], "values": [["batch_optimized"], ["record_limit"]]},
            {"keys": ["consumersPerGroup", "partitionsPerTopic"], "values": [[1, 1], [2, 2]]},
        ],
        "repeat": 2,
        "points": points,
    }
    (folder / "campaign.json").write_text(json.dumps(campaign))
    return samples


def offline_problems(html: str) -> list[str]:
    """External references outside the embedded scripts' bodies, and scripts loaded from a file or URL."""
    tags_only = re.sub(r"(<script\b[^>]*>).*?(</script>)", r"\1\2", html, flags=re.DOTALL)
    problems = re.findall(r"https?://[^\s\"'<>]*", tags_only)
    problems += re.findall(r"<script\b[^>]*\bsrc=[^>]*>", tags_only)
    problems += re.findall(r"<link\b[^>]*>", tags_only)
    return problems


@pytest.mark.spark
def test_campaign_summary_and_page(tmp_path, spark):
    samples = write_campaign(tmp_path)
    summary = summarize_campaign(tmp_path, spark)
    out = tmp_path / "campaign" / "summary"

    # per run: the measured phase only (the warm-up second has 10x the load and 50x slower records)
    runs = pd.read_parquet(out / "runs.parquet")
    assert list(zip(runs.point, runs.repeat, strict=True)) == list(RATES)
    assert pd.read_csv(out / "runs.csv").shape == runs.shape
    for row in runs.to_dict("records"):
        run = (row["point"], row["repeat"])
        rate = RATES[run]
        assert row["measured_seconds"] == MEASURED
        assert row["produced_msgs_per_s"] == pytest.approx(rate)
        assert row["consumed_msgs_per_s"] == pytest.approx(rate - 10)
        assert row["produced_mb_per_s"] == pytest.approx(rate * SIZE / 1e6)
        assert row["consumed_mb_per_s"] == pytest.approx((rate - 10) * SIZE / 1e6)
        run_samples = samples[(row["point"], row["repeat"])]
        assert row["e2e_p50_ms"] == pytest.approx(exact_percentile(run_samples["e2e"], 50, 100) / 1000, rel=ALPHA)
        assert row["e2e_p99_ms"] == pytest.approx(exact_percentile(run_samples["e2e"], 99, 100) / 1000, rel=ALPHA)
        assert row["e2e_p99_9_ms"] == pytest.approx(exact_percentile(run_samples["e2e"], 999, 1000) / 1000, rel=ALPHA)
        assert row["publish_p99_ms"] == pytest.approx(
            exact_percentile(run_samples["publish"], 99, 100) / 1000, rel=ALPHA
        )
        assert row["worker_producer_cpu_seconds_per_mb"] == pytest.approx(CPU_PER_MB["producer"])
        assert row["worker_consumer_cpu_seconds_per_mb"] == pytest.approx(CPU_PER_MB["consumer"])
        cores = (CPU_PER_MB["producer"] * rate + CPU_PER_MB["consumer"] * (rate - 10)) * SIZE / 1e6
        assert row["worker_cores"] == pytest.approx(cores)
        waited = 0.3 if (row["point"], row["repeat"]) == (3, 1) else 0.02
        assert row["worker_wake_wait_share"] == pytest.approx(waited)
        assert row["records_per_fetch"] == pytest.approx((rate - 10) / 2)  # every run's c0 on its own
        assert row["rx_bytes_per_consumed_byte"] == pytest.approx(1.5)
        assert row["compression_ratio"] == pytest.approx(compression(*run))
        assert row["sent"] == 14 * rate
        assert row["lost"] == row["repeat"] - 1
        dead_letters, expected = (row["dead_lettered"], row["dead_letter_duplicates"]), DEAD_LETTERS.get(run)
        assert dead_letters == expected if expected else all(map(math.isnan, dead_letters))  # none: not 0
        assert row["mode_limit_msgs_per_s"] == pytest.approx(0.8 * rate)
        assert row[MODE_KEY] == POINT_VALUES[row["point"]][MODE_KEY]
        assert row["consumersPerGroup"] == POINT_VALUES[row["point"]]["consumersPerGroup"]
    assert not any(column.startswith("mode_") and "steps" in column for column in runs.columns)

    # per point: mean, min, max and sample stddev over the repeats
    points = pd.read_parquet(out / "points.parquet").set_index("point")
    assert list(points.index) == [1, 2, 3, 4]
    assert pd.read_csv(out / "points.csv").shape[0] == 4
    assert points.loc[1, "consumed_msgs_per_s_mean"] == pytest.approx((990 + 1190) / 2)
    assert points.loc[1, "consumed_msgs_per_s_min"] == pytest.approx(990)
    assert points.loc[1, "consumed_msgs_per_s_max"] == pytest.approx(1190)
    assert points.loc[1, "consumed_msgs_per_s_stddev"] == pytest.approx(200 / math.sqrt(2))
    assert points.loc[3, "produced_msgs_per_s_mean"] == pytest.approx(2300)
    assert points.loc[3, "produced_msgs_per_s_stddev"] == pytest.approx(600 / math.sqrt(2))
    assert points.loc[2, "produced_mb_per_s_mean"] == pytest.approx(1505 * SIZE / 1e6)
    assert points.loc[2, "mode_limit_msgs_per_s_mean"] == pytest.approx(0.8 * 1505)
    assert points.loc[2, "lost_mean"] == pytest.approx(0.5)
    assert math.isnan(points.loc[1, "dead_lettered_mean"])  # no dead-letter queue: no figure, not 0
    assert points.loc[3, "dead_lettered_mean"] == 23 and points.loc[3, "dead_lettered_stddev"] == pytest.approx(
        6 / math.sqrt(2)
    )
    assert points.loc[3, "dead_letter_duplicates_max"] == 1 and points.loc[4, "dead_letter_missing_mean"] == 0
    for point in (1, 2, 3):
        p99s = [exact_percentile(samples[(point, r)]["e2e"], 99, 100) / 1000 for r in (1, 2)]
        assert points.loc[point, "e2e_p99_ms_mean"] == pytest.approx(np.mean(p99s), rel=ALPHA)
        assert points.loc[point, "e2e_p99_ms_min"] == pytest.approx(min(p99s), rel=ALPHA)
        assert points.loc[point, "e2e_p99_ms_max"] == pytest.approx(max(p99s), rel=ALPHA)
        assert points.loc[point, "repeats"] == 2
    # point 4 ran once that counts: its mean is that run's number, it has no stddev
    assert points.loc[4, "repeats"] == 1
    assert points.loc[4, "consumed_msgs_per_s_mean"] == pytest.approx(2990)
    assert points.loc[4, "consumed_msgs_per_s_min"] == points.loc[4, "consumed_msgs_per_s_max"]
    assert math.isnan(points.loc[4, "consumed_msgs_per_s_stddev"])
    assert points.loc[4, "status"] == "completed, failed"
    assert points.loc[4, "consumersPerGroup"] == 2

    written = json.loads((out / "summary.json").read_text())
    assert written == summary
    assert written["campaign"] == "levers"
    assert written["notes"] == [
        f"point 4, repeat 2 (share.acquire.mode=record_limit, consumersPerGroup=2, partitionsPerTopic=2): "
        f"failed: {FAILURE}",
        "point 3, repeat 1 (share.acquire.mode=record_limit, consumersPerGroup=1, partitionsPerTopic=1): a worker's "
        "threads waited to run 30% of the measured phase: its figures include that wait, not only Kafka's; spread "
        "its clients over more workers or hosts",
    ]
    [fourth] = [p for p in written["points"] if p["point"] == 4]
    assert fourth["values"] == POINT_VALUES[4]
    assert fourth["metrics"]["consumed_msgs_per_s"] == {"mean": 2990, "min": 2990, "max": 2990, "stddev": None}
    assert fourth["metrics"]["mode_limit_msgs_per_s"]["mean"] == pytest.approx(2400)

    # the page
    page = write_campaign_page(tmp_path)
    assert page == tmp_path / "campaign.html"
    html = page.read_text()
    assert offline_problems(html) == []
    assert sum(len(body) > 100_000 for body in re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.DOTALL)) == 1
    # two dimensions; the key numbers, the explore-limits limit, and records per fetch and the workers'
    # wait to run, which differ between points (the CPU per MB does not); the compression ratio;
    # dead_lettered, and the dead-letter duplicates that one run had (its missing ones are 0
    # everywhere: tabled, not charted)
    charts = 2 * (KEY_METRICS + 3 + 1 + 2)
    assert html.count("Plotly.newPlot") == charts
    figures = html.replace("\\u002f", "/")  # plotly's JSON escapes slashes
    for title in ("consumed msg/s by share.acquire.mode", "e2e p99 (ms) by consumersPerGroup / partitionsPerTopic"):
        assert title in figures
    for other in ("consumersPerGroup / partitionsPerTopic=1 / 1", "share.acquire.mode=record_limit"):
        assert f'"name":"{other}"' in figures  # a series per value of the other dimension
    table = html[html.index('<section id="points">') :]
    table = table[: table.index("</section>")]
    rows = re.findall(r"<tr>(.*?)</tr>", table)
    assert len(rows) == 1 + 4  # the header and every point
    assert "record_limit" in rows[4] and "2 / 2" in rows[4] and "completed, failed" in rows[4]
    assert "2,990" in rows[4]  # consumed msg/s
    assert "dead_lettered (records)" in rows[0] and "dead_letter_missing (records)" in rows[0]
    assert "dead_letter_duplicates (records) by share.acquire.mode" in figures
    assert "dead_letter_missing (records) by" not in figures
    assert "1,090" in rows[1]
    assert 'href="levers-1-1/report.html"' in rows[1]
    assert table.count("href=") == 1  # the other runs have no report
    assert FAILURE in html


@pytest.mark.unit
def test_a_result_with_rows_of_no_run_is_refused_not_dropped():
    per_run = pd.DataFrame({"point": [1, 2], "repeat": [1, 1], "sent": [10, 20]})
    assert placed(per_run, "intervals") is per_run
    orphans = pd.DataFrame({"point": [1, None], "repeat": [1, None], "sent": [10, 5]})  # a file's rows found no run
    with pytest.raises(DimsterError, match="rows of metrics/intervals matched no run of the campaign"):
        placed(orphans, "intervals")


@pytest.mark.spark
def test_spark_failure_is_one_error_line(tmp_path, spark):
    write_campaign(tmp_path)
    # a whole part (its footer reads) whose columns cannot be read as the others' are
    broken = tmp_path / "levers-2-1" / "metrics" / "intervals" / "part-00001.parquet"
    pq.write_table(pa.table({"run_time_s": ["not a number"], "sent": ["many"], "phase": [1]}), broken)
    with pytest.raises(DimsterError) as raised:
        summarize_campaign(tmp_path, spark)
    message = str(raised.value)
    assert message.startswith(f"Spark could not summarize the campaign {tmp_path}: the runs' metrics/intervals ")
    assert "\n" not in message
    assert not (tmp_path / "campaign" / "summary" / "points.parquet").exists()


@pytest.mark.unit
def test_mode_fields_are_numbers_and_booleans():
    info = {
        "mode": {
            "type": "correctness",
            "passed": True,
            "lost": 0,
            "corrupt": 2,
            "out_of_order": 0,
            "duplicates": 0,
            "drained": False,
            "steps": [1, 2],
            "verdict": "ok",
        }
    }
    assert mode_fields(info) == {
        "mode_passed": 1,
        "mode_lost": 0,
        "mode_corrupt": 2,
        "mode_out_of_order": 0,
        "mode_duplicates": 0,
        "mode_drained": 0,
    }
    assert mode_fields({}) == {}
    assert mode_fields({"mode": "steady"}) == {}


@pytest.mark.unit
def test_campaign_without_runs_or_summary(tmp_path):
    """Nothing ran yet: the summary is empty tables and notes (no Spark); the page without a summary
    is the status table with a note saying so."""
    points = [campaign_point(p, r, status="pending", bundle=None, failure=None) for p in (1, 2, 3, 4) for r in (1, 2)]
    points[0] = campaign_point(1, 1, status="interrupted", bundle=None, failure=None)
    campaign = {"name": "levers", "repeat": 2, "points": points, "dimensions": []}
    (tmp_path / "campaign.json").write_text(json.dumps(campaign))

    page = write_campaign_page(tmp_path).read_text()
    assert "the campaign summary is missing" in page
    assert "Plotly.newPlot" not in page
    assert offline_problems(page) == []
    for label in ("batch_optimized", "record_limit", "interrupted, pending"):
        assert label in page

    summary = summarize_campaign(tmp_path, "local[1]")
    assert summary["notes"][0].startswith("point 1, repeat 1 (share.acquire.mode=batch_optimized")
    assert summary["notes"][0].endswith("): interrupted")
    assert summary["notes"][1].endswith("): not run")
    assert summary["notes"][-1] == "no run of the campaign completed: there is nothing to summarize"
    points_table = pd.read_parquet(tmp_path / "campaign" / "summary" / "points.parquet")
    assert list(points_table.point) == [1, 2, 3, 4]
    assert list(points_table.repeats) == [0, 0, 0, 0]
    assert pd.read_parquet(tmp_path / "campaign" / "summary" / "runs.parquet").empty
    assert "no run of the campaign has numbers" in write_campaign_page(tmp_path).read_text()
