"""A run's diagnoses after the run: the report's section and the predicted rate drawn on the consumption
chart where each explained limit held (report/charts.py, report/html.py). No Kafka, no Spark."""

import json
from pathlib import Path

import pytest

from dimster.diagnosis.timeline import Stretch, diagnoses, stretches
from dimster.report.campaign_page import point_table
from dimster.report.charts import limit_prediction
from dimster.report.data import RunData
from dimster.report.html import write_report
from tests.report_runs import LOAD_STARTED, Scenario, write_run

pytestmark = pytest.mark.unit

T0 = 1_795_000_000.0
LOCK = {
    "limit": "lock budget", "limitRate": 1200.0, "measured": 1180.0, "offered": 2000.0,
    "sentence": "lock budget 100 / 52-record batches -> 2 of 4 consumers busy per partition x 200 msg/s x 3 "
    "partitions -> 1,200 msg/s", "levers": ["groupConfig.share.partition.max.record.locks"],
    "allowed": {"lock budget": 1200.0, "processing capacity": 2400.0},
}  # fmt: skip
UNEXPLAINED = {
    "limit": "unexplained",
    "limitRate": None,
    "measured": 700.0,
    "offered": 2000.0,
    "allowed": LOCK["allowed"],
}
PROCESSING = {**LOCK, "limit": "processing capacity", "limitRate": 800.0, "sentence": "processing capacity ..."}


def events(at_limits: list[tuple[float, str, dict]]) -> list[dict]:
    return [
        {"time": T0, "event": "load_started"},
        *({"time": T0 + at, "event": kind, **d} for at, kind, d in at_limits),
    ]


def test_each_explained_limit_holds_until_the_next_diagnosis():
    found = diagnoses(
        events([(20, "limit", UNEXPLAINED), (30, "limit", LOCK), (50, "limit_cleared", {}), (60, "limit", PROCESSING)])
    )
    assert [d["atSeconds"] for d in found] == [20, 30, 50, 60]
    assert stretches(found) == [Stretch(30, 50, 1200.0, "lock budget"), Stretch(60, None, 800.0, "processing capacity")]


def test_the_consumption_chart_draws_the_prediction_times_the_groups():
    at = [(30, "limit", LOCK), (50, "limit_cleared", {}), (60, "limit", PROCESSING), (80, "stopping", {})]
    timeline = {"events": events(at)}  # the last holds until load stops, not into the drain
    run = RunData(Path("run"), {"load_started": T0, "groups": {"g0": "t", "g1": "t"}}, {}, {}, {}, timeline)
    trace = limit_prediction(run, (0.0, 90.0))
    assert trace is not None and trace.name == "limit's prediction"
    gaps = lambda values: [v if v == v else None for v in values]  # noqa: E731  (a gap is NaN in the trace)
    assert gaps(trace.x) == [30, 50, None, 60, 80, None]
    assert gaps(trace.y) == [2400.0, 2400.0, None, 1600.0, 1600.0, None]
    assert limit_prediction(RunData(Path("run"), {}, {}, {}, {}, {"events": []}), (0.0, 90.0)) is None


def test_the_report_lists_the_diagnoses_and_draws_the_prediction(tmp_path):
    at = LOAD_STARTED
    limits = [(45.0, "limit", {**LOCK}), (75.0, "limit_cleared", {})]
    page = write_report(write_run(tmp_path, Scenario(events=limits))).read_text()
    assert ('<section id="limits">' in page and "limit&#x27;s prediction" in page) or "limit's prediction" in page
    assert "+45 s  lock budget 100 / 52-record batches" in page and "(measured 1,180)" in page
    assert "+75 s  none: consumption keeps up" in page
    assert (
        at > 0 and '<section id="limits">' not in write_report(write_run(tmp_path, Scenario(name="calm"))).read_text()
    )


def test_the_campaign_page_names_each_point_s_binding_limit_from_its_runs(tmp_path):
    ended = {  # point -> its repeats' run.json `limit`
        1: [{"limit": "lock budget", "limitRate": 1200.0, "measured": 1180.0, "offered": 2000.0}] * 2,
        2: [None, {"limit": "unexplained", "limitRate": None, "measured": 700.0, "offered": 2000.0}],
    }
    points = []
    for index, limits in ended.items():
        for repeat, limit in enumerate(limits, start=1):
            bundle = tmp_path / f"run-{index}-{repeat}"
            bundle.mkdir()
            (bundle / "run.json").write_text(json.dumps({"status": "completed", "limit": limit}))
            points.append(
                {"index": index, "repeat": repeat, "values": {}, "status": "completed", "bundle": bundle.name}
            )
    table = point_table(tmp_path, {"points": points}, [], None)
    assert "<th>binding limit</th>" in table.replace(' class="text"', "")
    assert "lock budget 1,200 msg/s</td>" in table and "lock budget 1,200 msg/s, lock" not in table
    assert ">unexplained</td>" in table
    calm = {"points": [{**points[0], "bundle": None}]}
    assert "binding limit" not in point_table(tmp_path, calm, [], None)
