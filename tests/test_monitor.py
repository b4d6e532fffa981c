"""`dimster monitor` with Debian's real Prometheus: it scrapes a run on `local` and the brokers' JMX
exporter; its numbers agree with the results bundle's, the bundle carries the brokers' metrics, and
both endpoints pass Prometheus' own lint (`promtool check metrics`)."""

import json
import shutil
import subprocess
import urllib.parse
import urllib.request

import pytest

from dimster.environment import load_environment
from tests.conftest import busy_port, dimster, spare_ports
from tests.runs import run_info, start_run, status, summarized, table, wait


def monitor_port() -> int:
    """A port of this session's block that nothing else uses."""
    return spare_ports(4)["brokerMetricsPortBase"] + 5


def query(url: str, expr: str, at: float) -> list[dict]:
    """A PromQL instant query through Prometheus' HTTP API."""
    address = f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": at})
    with urllib.request.urlopen(address, timeout=10) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: install prometheus (apt-get install prometheus; scripts/test.sh does)"
    return found


def lint(url: str) -> tuple[int, str]:
    """`promtool check metrics` of what an endpoint serves: its exit status and output, (0, "") when clean."""
    with urllib.request.urlopen(url, timeout=30) as response:
        exposition = response.read()
    check = subprocess.run([promtool(), "check", "metrics"], input=exposition, capture_output=True, timeout=60)
    return check.returncode, (check.stdout + check.stderr).decode()


@pytest.fixture
def prometheus():
    up = dimster("monitor", "up", "local", "--port", str(monitor_port()), "--json")
    assert up.code == 0, up.stderr
    try:
        yield json.loads(up.stdout)["url"]
    finally:
        assert dimster("monitor", "down", "local").code == 0


@pytest.mark.kafka
def test_prometheus_scrapes_a_run_and_its_brokers_and_agrees_with_the_bundle(tmp_path, prometheus, spark):
    assert dimster("monitor", "status", "local").code == 0
    promtool()
    # the brokers are scraped every 5 s from the run's start (SCRAPE_EVERY): a warm-up of 8 s holds a scrape
    # however long the start took (3 s held one only when the start took 2 s or more: a quiet host missed it)
    keys = dict(producersPerTopic=1, producerRate=1000, durationSeconds=12, warmupSeconds=8, consumerType="SHARE_GROUP")
    process, bundle = start_run(tmp_path, "monitored", **keys)
    try:  # while share consumers fetch, the brokers serve every kind of series they have
        wait("received>=1000")
        endpoints = {"run": status()["metricsUrl"], **load_environment("local").broker_metrics_urls}
        linted = {endpoint: lint(url) for endpoint, url in endpoints.items()}
    finally:
        stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0 and "run completed" in stdout, stderr + stdout
    assert len(linted) >= 2 and linted == {endpoint: (0, "") for endpoint in endpoints}
    run_id, ended = bundle.name, run_info(bundle)["ended"]

    # Prometheus adds up the records the bundle has, report by report: each value it scraped is the
    # bundle's consumers' records summed over the reports up to one that had ended by the time the run
    # answered that scrape (when the coordinator took a report in is a race on a busy host; which records
    # each report holds is not). Prometheus stamps a scrape with its start; the answer may come as late
    # as its duration after (CI r112: on a host busy 99 %, a report that ended after the stamp was in it).
    [series] = query(prometheus, f'dimster_client_received_messages_total{{run="{run_id}"}}[10m]', ended)
    assert series["metric"]["role"] == "share_consumer" and series["metric"]["job"] == "dimster"
    instance = series["metric"]["instance"]
    [durations] = query(prometheus, f'scrape_duration_seconds{{job="dimster",instance="{instance}"}}[10m]', ended)
    answered_by = {float(at): float(at) + float(took) for at, took in durations["values"]}
    intervals = table(bundle, "intervals")
    consumers = intervals[intervals.role != "producer"]
    per_report = consumers.groupby("end_time").received.sum().sort_index()  # one worker: one report a time
    first_end_by_total: dict[int, float] = {0: 0.0}
    for end, total in per_report.cumsum().items():
        first_end_by_total.setdefault(int(total), float(end))
    scrapes = [(float(at), int(float(value))) for at, value in series["values"]]
    early = [
        (at, value, first_end_by_total.get(value))
        for at, value in scrapes
        if first_end_by_total.get(value, float("inf")) > answered_by[at] + 0.01  # timestamps in ms
    ]
    assert not early, (early, scrapes)  # (scrape's stamp, its value, the first report's end with that total)
    measured = consumers[consumers.phase == "measure"]
    in_measure = {value for at, value in scrapes if measured.end_time.min() <= at <= measured.end_time.max()}
    assert len(in_measure) >= 2 and max(value for _, value in scrapes) > 0

    # The brokers' own series, scraped by the same Prometheus.
    # over the run: a scrape of a starved broker that times out marks its series stale, and one may come
    # just before `ended` (Prometheus' timeout is its 5-s interval)
    share_fetch_p99 = 'kafka_network_request_totaltime_seconds{request="ShareFetch",percentile="0.99"}[10m]'
    share_fetch = query(prometheus, share_fetch_p99, ended)
    assert share_fetch and share_fetch[0]["metric"]["job"] == "kafka-brokers"
    [topic] = run_info(bundle)["topics"]
    # over the run: the broker drops a share partition's series once the run has deleted its topic, and
    # Prometheus marks them stale at its next scrape, which may come before `ended`
    in_flight = query(prometheus, f'kafka_server_share_partition_in_flight_messages{{topic="{topic}"}}[10m]', ended)
    assert sorted(int(s["metric"]["partition"]) for s in in_flight) == [0, 1, 2]

    # The bundle explains itself without Prometheus: the brokers' metrics, scraped and summarized.
    brokers = table(bundle, "brokers")
    assert set(brokers.phase) >= {"warmup", "measure"} and brokers.end_time.nunique() >= 3
    summary = summarized(bundle, spark)["brokers"]
    apis = {r["request"]: r for r in summary["requests"]}
    assert apis["ShareFetch"]["requests_per_s"] > 0 and apis["Produce"]["requests_per_s"] > 0
    assert apis["ShareFetch"]["p99_ms"] is not None
    assert summary["share"]["acknowledgements_per_s"]["Accept"] > 0
    assert {p["partition"] for p in summary["share"]["in_flight_messages"] if p["topic"] == topic} == {0, 1, 2}
    assert "Brokers: in-flight records per share-partition" in (bundle / "report.html").read_text()


@pytest.mark.unit
def test_monitor_bad_input_is_one_line(tmp_path):
    with busy_port() as port:
        result = dimster("monitor", "up", "local", "--port", str(port))
    errors = [line for line in result.stderr.splitlines() if line.startswith("dimster: error:")]
    assert result.code != 0 and len(errors) == 1 and "Traceback" not in result.stderr
    assert f"port {port}" in errors[0] and "in use" in errors[0]

    no_prometheus = dimster("monitor", "up", "local", env={"PATH": str(tmp_path)})  # nothing on PATH
    errors = [line for line in no_prometheus.stderr.splitlines() if line.startswith("dimster: error:")]
    assert no_prometheus.code != 0 and len(errors) == 1, no_prometheus.stderr
    assert "apt-get install prometheus" in errors[0]
    assert dimster("monitor", "status", "local").code == 1  # nothing was started
