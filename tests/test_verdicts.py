"""Performance tests that pass or fail, on the real `local` cluster (issue 36): thresholds that hold and
one that is breached (exit 8, the verdict, JUnit read by junitparser, the report's first panel), a
baseline comparison that finds a real regression (the same workload with processing ten times as
long) and one that finds none (two repeats of one workload), the schemas against real bundles, and
the history of the three runs. Three short runs serve every test.

Why the verdicts cannot flip with the host's load: the baseline's consumer has five times the
headroom it needs, the candidate's has half (below). A busy host slows both, but it would have to slow
the baseline's consumer fivefold to hide the difference, and then dimster's load generator is
saturated (diagnosis/generator.py): the comparison says `undecided`, naming the saturated side, and
with `--judge-saturated` still `worse`, as the candidate cannot consume more than half what it is
offered however fast the host is."""

import json
from typing import Any

import pandas as pd
import pytest
import yaml
from jsonschema import Draft7Validator
from junitparser import Failure, JUnitXml

from dimster.profile import DEFAULT_KAFKA_VERSION
from dimster.results.junit import run_suite, write_junit
from dimster.schemas import schemas
from tests.conftest import dimster
from tests.runs import no_loss, run_info, run_until, summarized, write_workload

pytestmark = pytest.mark.kafka

# One producer at 400 msg/s, one consumer that processes each record for 0.5 ms: it could keep up with
# 2,000 msg/s. Ten times the processing time (5 ms: 200 msg/s at most) consumes at most half of what
# is offered: its backlog and e2e grow by 200 records a second, whatever else the host does.
WORKLOAD = {
    "consumerType": "CONSUMER_GROUP",
    "partitionsPerTopic": 2,
    "producersPerTopic": 1,
    "producerRate": 400,
    "consumersPerGroup": 1,
    "consumerProcMsMin": 0.5,
    "consumerProcMsMax": 0.5,
    "warmupSeconds": 2,
    "reportIntervalSeconds": 1,
    # batches of 50 (25 or 250 ms of processing): each second's count is one of the rate's samples,
    # where librdkafka's 500 would take 2.5 s at 5 ms and leave seconds with none
    "kafkaConfig": {"producerConfig": {"linger.ms": 5}, "consumerConfig": {"max.poll.records": 50}},
    # the thresholds' bounds are wide or, for b, breached by construction: judged on a busy host too
    "saturatedPhases": "judge",
}
THRESHOLDS = [
    "e2e.p99 < 30s",
    "publish.p99.9 < 30s",
    "consumed.rate >= 0.5 * produced.rate",
    "lost == 0",
    {"threshold": "duplicates == 0", "abortOnFail": True},
    "brokerLag.max < 1000000",
    "produced.rate > 100 msg/s",
]
UNTIL = "received>=2500 and elapsedSeconds>=9"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, spark) -> dict[str, Any]:
    """a1 and a2: two repeats that pass; b: processing twice as long, run in the foreground through
    the CLI (its own summary, exit code and JUnit), breaching `consumed.rate >= 0.95 * produced.rate`."""
    folder = tmp_path_factory.mktemp("verdicts")
    assert dimster("cluster", "up", "local").code == 0
    found: dict[str, Any] = {}  # bundles by name, and b's CLI result and JUnit file
    for name in ("a1", "a2"):
        bundle = run_until(folder / name, "steady", UNTIL, thresholds=THRESHOLDS, **WORKLOAD)
        (folder / "results").mkdir(exist_ok=True)
        found[name] = bundle.rename(folder / "results" / bundle.name)
        summarized(found[name], spark)
    # its backlog (some 2,400 records, 12 s at 200 msg/s) is left: a consumer group's records left are
    # unconsumed, counted from the group's own position, not lost
    slower = {**WORKLOAD, "consumerProcMsMin": 5.0, "consumerProcMsMax": 5.0, "durationSeconds": 10,
              "drainTimeoutSeconds": 2}  # fmt: skip
    b = write_workload(folder, "steady", thresholds=["consumed.rate >= 0.95 * produced.rate", "lost == 0"], **slower)
    junit = folder / "b.xml"
    result = dimster("run", "local", "-w", str(b), "--results", str(folder / "results"), "--junit", str(junit))
    [found["b"]] = [path for path in (folder / "results").iterdir() if path not in (found["a1"], found["a2"])]
    found["b-result"], found["b-junit"] = result, junit
    return found


def test_thresholds_hold_on_a_real_run_each_at_its_summary_figure(runs, tmp_path):
    summary = json.loads((runs["a1"] / "summary" / "summary.json").read_text())
    verdict = summary["verdict"]
    assert verdict["passed"] and [r["passed"] for r in verdict["thresholds"]] == [True] * len(THRESHOLDS)
    values = {r["threshold"]: r["value"] for r in verdict["thresholds"]}
    assert values["e2e.p99 < 30s"] == summary["latency_ms"]["e2e"]["p99"]
    assert values["publish.p99.9 < 30s"] == summary["latency_ms"]["publish"]["p99_9"]
    assert values["produced.rate > 100 msg/s"] == summary["throughput"]["produced_msgs_per_s"]
    assert values["consumed.rate >= 0.5 * produced.rate"] == summary["throughput"]["consumed_msgs_per_s"]
    # the brokers' lag of the measured phase only: readings of that phase, summed over the run's one group
    lag = summary["broker_lag_total"]
    table = pd.read_csv(runs["a1"] / "summary" / "broker_lag.csv")
    measured = table[table.phase == "measure"].lag.tolist()
    assert lag["readings"] == len(measured) > 0 and values["brokerLag.max < 1000000"] == lag["max"] == max(measured)
    no_loss(run_info(runs["a1"]))
    junit = tmp_path / "a1.xml"
    write_junit([run_suite(verdict, run_info(runs["a1"]))], junit)
    [suite] = list(JUnitXml.fromfile(str(junit)))
    assert (suite.tests, suite.failures, suite.errors) == (len(THRESHOLDS), 0, 0)


def test_a_breached_threshold_exits_8_with_its_verdict_junit_and_report_panel(runs):
    result = runs["b-result"]
    assert result.code == 8, result.stderr + result.stdout
    assert result.error_lines == [f"dimster: error: thresholds breached: 1 of 2 (results kept in {runs['b']})"]
    assert f"junit: {runs['b-junit']}" in result.stdout
    assert "thresholds: 1 of 2 passed: FAILED" in result.stdout
    summary = json.loads((runs["b"] / "summary" / "summary.json").read_text())
    rate, lost = summary["verdict"]["thresholds"]
    throughput = summary["throughput"]
    assert rate["passed"] is False and lost["passed"] is True and summary["verdict"]["passed"] is False
    assert rate["value"] == throughput["consumed_msgs_per_s"] < 0.95 * throughput["produced_msgs_per_s"]
    [account] = run_info(runs["b"])["account"].values()
    assert account["closes"] and account["unconsumed"] > 0 and account["lost"] == 0, account
    assert rate["bound"] == pytest.approx(0.95 * throughput["produced_msgs_per_s"])
    [suite] = list(JUnitXml.fromfile(str(runs["b-junit"])))
    assert (suite.tests, suite.failures) == (2, 1)
    [failed] = [case for case in suite if case.result]
    assert failed.name == rate["threshold"] and "consumed.rate = " in failed.result[0].message
    page = (runs["b"] / "report.html").read_text()
    assert '<h3>Thresholds</h3><p>1 of 2 threshold(s) held <span class="badge failed">failed</span>' in page


def saturated(bundle) -> bool:
    """Whether the run's measured phase had a saturated load generator (summary.json's `generator`)."""
    summary = json.loads((bundle / "summary" / "summary.json").read_text())
    return bool(summary["generator"]["measure"]["saturated"])


def test_compare_finds_the_slower_processing_a_regression(runs, tmp_path):
    junit = tmp_path / "compare.xml"
    judged = dimster(
        "compare", str(runs["a1"]), str(runs["b"]), "--verdict", "--json", "--junit", str(junit),
        "--judge-saturated", "-o", str(tmp_path / "compare.html"),
    )  # fmt: skip
    assert judged.code == 9, judged.stderr
    [point] = json.loads(judged.stdout)["points"]
    figures = {f["figure"]: f for f in point["figures"]}
    for name in ("e2e.p99", "consumed.rate"):  # one repeat a side: the per-interval samples decide
        assert figures[name]["verdict"] == "worse" and figures[name]["test"] == "intervals", figures[name]
    assert figures["lost"]["verdict"] != "worse"
    [suite] = list(JUnitXml.fromfile(str(junit)))
    assert {case.name for case in suite if case.result and isinstance(case.result[0], Failure)} >= {"e2e.p99"}
    assert 'class="verdict-worse"' in (tmp_path / "compare.html").read_text()
    # without --judge-saturated: the same, unless a side's load generator was saturated; then undecided
    plain = dimster("compare", str(runs["a1"]), str(runs["b"]), "--verdict", "--json", "-o", str(tmp_path / "p.html"))
    rows = {f["figure"]: f for f in json.loads(plain.stdout)["points"][0]["figures"]}
    if saturated(runs["a1"]) or saturated(runs["b"]):
        assert plain.code == 0 and rows["e2e.p99"]["verdict"] == "undecided", rows["e2e.p99"]
        assert "load generator was saturated" in rows["e2e.p99"]["reason"]
    else:
        assert plain.code == 9 and rows["e2e.p99"]["verdict"] == rows["consumed.rate"]["verdict"] == "worse"


def test_compare_finds_no_regression_between_two_repeats(runs, tmp_path):
    """The claim is on the rates and counts, at their default tolerances. A busy host moves latencies
    as far as it likes between two identical runs (32 against 164 ms of publish p99 beside another
    Kafka test; 12 against 222 ms beside a CPU hog, p = 0.03), so no relative tolerance holds for
    them: they get 30 s, and each run's are below 30 s (asserted here), so no difference can reach it."""
    latencies = ("e2e.p50", "e2e.p99", "e2e.p99.9", "publish.p99")
    for name in ("a1", "a2"):
        measured = json.loads((runs[name] / "summary" / "summary.json").read_text())["latency_ms"]
        compared = [measured["e2e"][s] for s in ("p50", "p99", "p99_9")] + [measured["publish"]["p99"]]
        assert max(compared) < 30_000, (name, compared)
    loose = [f"--tolerance={figure}=30s" for figure in latencies]
    html = str(tmp_path / "compare.html")
    result = dimster("compare", str(runs["a1"]), str(runs["a2"]), "--verdict", "--json", *loose, "-o", html)
    assert result.code == 0, result.stderr + result.stdout
    [point] = json.loads(result.stdout)["points"]
    assert not [f["figure"] for f in point["figures"] if f["verdict"] == "worse"]
    rates = {f["figure"]: f for f in point["figures"] if f["figure"] in ("produced.rate", "consumed.rate")}
    assert {f["tolerance"] for f in rates.values()} == {"5%"} and len(rates) == 2


def test_real_bundles_match_the_schemas(runs):
    published = schemas()
    for name in ("a1", "b"):
        for schema, document in (
            ("run", json.loads((runs[name] / "run.json").read_text())),
            ("summary", json.loads((runs[name] / "summary" / "summary.json").read_text())),
            ("workload", yaml.safe_load((runs[name] / "workload.yaml").read_text())),
        ):
            problems = [e.message for e in Draft7Validator(published[f"{schema}.schema.json"]).iter_errors(document)]
            assert problems == [], (name, schema, problems[:3])


def test_history_lists_the_runs_with_their_verdicts(runs):
    result = dimster("history", str(runs["a1"].parent), "--json")
    assert result.code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["id"] for row in rows] == [runs["a1"].name, runs["a2"].name, runs["b"].name]
    assert [row["verdict"] for row in rows] == ["passed", "passed", "failed"]
    assert {row["kafka"] for row in rows} == {DEFAULT_KAFKA_VERSION}
    b_summary = json.loads((runs["b"] / "summary" / "summary.json").read_text())
    assert rows[2]["e2e.p99"] == b_summary["latency_ms"]["e2e"]["p99"]
