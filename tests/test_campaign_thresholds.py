"""A campaign's thresholds (issue 36, item 1): added to every point's workload, limited to the figures
a campaign's per-run table holds, and judged per point on its repeats' mean. No broker:
tests/test_campaigns.py judges a real campaign."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from dimster.campaign.model import load_campaign
from dimster.errors import DimsterError
from dimster.verdict.campaign import campaign_verdict

pytestmark = pytest.mark.unit


def write(folder, **keys):
    path = folder / "c.yaml"
    base = {"name": "w", "thresholds": ["lost == 0"]}
    data = {"name": "c", "base": base, "dimensions": [{"key": "producerRate", "values": [100, 200]}], **keys}
    path.write_text(yaml.safe_dump(data))
    return path


def test_campaign_thresholds_join_the_base_s_in_every_point(tmp_path):
    campaign = load_campaign(write(tmp_path, thresholds=[{"threshold": "duplicates == 0", "abortOnFail": True}]))
    for point in campaign.points:
        assert [(t.threshold, t.abort_on_fail) for t in point.workload.thresholds] == [
            ("lost == 0", False), ("duplicates == 0", True),
        ]  # fmt: skip


@pytest.mark.parametrize(
    ("keys", "line"),
    [
        ({"thresholds": ["brokerLag.max < 10"]}, "'brokerLag.max < 10': a campaign's summary has no brokerLag.max"),
        ({"thresholds": ["e2e.p75 < 10ms"]}, "a campaign's summary has no e2e.p75 (its figures: "),
        ({"dimensions": [{"key": "thresholds", "values": [["lost == 0"]]}]}, "'thresholds' cannot be a dimension"),
        ({"thresholds": ["e2e.p99 < 10"]}, "e2e.p99 is a latency: write its bound with a unit"),
    ],
)
def test_a_threshold_a_campaign_cannot_judge_is_one_line(tmp_path, keys, line):
    with pytest.raises(DimsterError) as raised:
        load_campaign(write(tmp_path, **keys))
    assert line in str(raised.value) and "\n" not in str(raised.value)


def test_each_point_is_judged_on_its_repeats_mean_and_a_point_not_completed_is_not():
    points = [
        {"index": 1, "repeat": 1, "label": "producerRate=100", "status": "completed"},
        {"index": 1, "repeat": 2, "label": "producerRate=100", "status": "completed"},
        {"index": 2, "repeat": 1, "label": "producerRate=200", "status": "completed", "aborted_by": "lost == 0"},
        {"index": 3, "repeat": 1, "label": "producerRate=300", "status": "failed"},
    ]
    runs = pd.DataFrame(
        {"point": [1, 1, 2], "repeat": [1, 2, 1], "consumed_msgs_per_s": [90.0, 110.0, 199.0],
         "e2e_p99_ms": [4.0, 8.0, 30.0], "lost": [0.0, 0.0, 0.0]}
    )  # fmt: skip
    verdict = campaign_verdict(["consumed.rate >= 95 msg/s", "e2e.p99 < 10ms"], points, runs)
    assert verdict is not None and verdict["passed"] is False
    one, two, three = verdict["points"]
    assert one["passed"] is True and [r["value"] for r in one["thresholds"]] == [100.0, 6.0]
    assert one["thresholds"][0]["repeats"] == [90.0, 110.0] and one["thresholds"][1]["repeats"] == [4.0, 8.0]
    assert two["passed"] is False and [r["passed"] for r in two["thresholds"]] == [True, False]
    assert three == {"point": 3, "label": "producerRate=300", "status": "failed", "passed": None, "thresholds": []}
    assert campaign_verdict([], points, runs) is None
    stopped = campaign_verdict(["consumed.rate >= 95 msg/s"], points[2:3], runs)
    assert stopped is not None and stopped["points"][0]["passed"] is False  # its run stopped early


def test_the_campaign_page_lists_each_point_s_outcome():
    from dimster.report.verdict_panel import campaign_verdict_section

    points = [
        {"index": 1, "repeat": 1, "label": "producerRate=100", "status": "completed"},
        {"index": 2, "repeat": 1, "label": "producerRate=200", "status": "failed"},
    ]
    runs = pd.DataFrame({"point": [1], "repeat": [1], "consumed_msgs_per_s": [90.0]})
    html = campaign_verdict_section(campaign_verdict(["consumed.rate >= 95 msg/s"], points, runs))
    assert '<span class="badge failed">failed</span>' in html
    row = '<td class="text">1</td><td class="text">producerRate=100</td><td class="text"><span class="bad">breached'
    assert row in html
    assert "<code>consumed.rate &gt;= 95 msg/s</code>: 90 msg/s" in html and "not judged (failed)" in html
    assert campaign_verdict_section(None) == ""


def test_a_point_a_repeat_of_which_had_a_saturated_generator_has_its_latencies_and_rates_undecided():
    """As a run's own verdict (verdict/judge.py): repeat 2 waited for its cores 40 % of its measured
    phase, so the point's mean rate and p99 measure dimster too; its counts are judged all the same."""
    from dimster.cli.summary import check_campaign_verdict
    from dimster.errors import ThresholdsBreached
    from dimster.report.verdict_panel import campaign_verdict_section
    from dimster.results.junit import campaign_suites

    points = [
        {"index": i, "repeat": r, "label": f"producerRate={100 * i}", "status": "completed"}
        for i in (1, 2, 3) for r in (1, 2)
    ]  # fmt: skip
    runs = pd.DataFrame(
        {"point": [1, 1, 2, 2, 3, 3], "repeat": [1, 2] * 3,
         "consumed_msgs_per_s": [99.0, 97.0, 90.0, 80.0, 300.0, 298.0],
         "lost": [0.0, 0.0, 0.0, 0.0, 0.0, 2.0], "generator_saturated_share": [0.0, 0.4, 0.05, None, 0.0, 0.5]}
    )  # fmt: skip
    thresholds = ["consumed.rate >= 95 msg/s", "lost == 0"]
    verdict = campaign_verdict(thresholds, points, runs)
    assert verdict is not None
    one, two, three = verdict["points"]
    assert [r["passed"] for r in one["thresholds"]] == [None, True] and one["passed"] is False
    assert one["thresholds"][0]["note"] == (
        "undecided: the load generator was saturated for 40% of repeat 2's measured phase: the figure measures "
        "dimster as well as Kafka (saturatedPhases: judge insists)"
    )
    assert [r["passed"] for r in two["thresholds"]] == [False, True]  # 5 %: under SATURATED_PHASE_SHARE
    assert [r["passed"] for r in three["thresholds"]] == [None, False]  # a loss is a loss
    insisted = campaign_verdict(thresholds, points, runs, judge_saturated=True)
    assert insisted is not None and [p["passed"] for p in insisted["points"]] == [True, False, False]

    html = campaign_verdict_section(verdict)
    assert '<td class="text">1</td><td class="text">producerRate=100</td><td class="text"><span class="warn">' in html
    assert html.count('<span class="bad">breached</span>') == 2 and "badge failed" in html
    with pytest.raises(ThresholdsBreached) as raised:
        check_campaign_verdict(Path("c"), {"verdict": verdict})
    assert str(raised.value) == "thresholds breached at point(s) 2, 3; undecided at point(s) 1 (in c)"
    outcomes = [[c.outcome for c in suite.cases] for suite in campaign_suites(verdict, "c")]
    assert outcomes == [["skipped", "passed"], ["failed", "passed"], ["skipped", "failed"]]
