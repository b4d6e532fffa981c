"""The dead-letter figures (KIP-1191) in every output, by issue 35's names: `dimster status` and its
--json, `wait --until` conditions, the run's Prometheus endpoint, the console's status line and the
run's last line, the report's key numbers and account, `dimster compare`, and the campaign page. A
run without a dead-letter queue shows none of them."""

from pathlib import Path

import pandas as pd
import pytest

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.end import ended_line
from dimster.coordinator.control.conditions import holds, parse_condition
from dimster.coordinator.control.console import dead_letter_counts, status_line
from dimster.coordinator.control.exporter import StatusExporter
from dimster.coordinator.loop.status import RunFacts, numeric_status
from dimster.report.campaign_page import charted_metrics, point_table
from dimster.report.compare import KEY_ROWS
from dimster.report.data import RunData
from dimster.report.key_numbers import key_numbers
from dimster.report.page import MISSING
from tests.runs import scrape

pytestmark = pytest.mark.unit

DEAD_LETTER_FIELDS = ("dead_lettered", "dead_letter_missing", "dead_letter_duplicates")
TOTALS = {
    "sent": 1000, "acked": 1000, "received": 1000, "lost": 0, "unconsumed": 0, "in_doubt": 0, "duplicates": 0,
    "send_errors": 0, "backlog": 0,
}  # fmt: skip


def aggregate(dead_lettered=None, missing=None, duplicates=None) -> RunAggregate:
    a = RunAggregate({"g": "t"})
    a.dead_lettered, a.dead_letter_missing, a.dead_letter_duplicates = dead_lettered, missing, duplicates
    return a


def status(a: RunAggregate) -> dict:
    return numeric_status(a, RunFacts(0.0, 1, 1, {}, None, None, None))


def test_the_status_gives_the_dead_letter_counts_by_their_names_and_none_without_a_queue():
    assert [status(aggregate())[f] for f in DEAD_LETTER_FIELDS] == [None, None, None]
    assert [status(aggregate(40))[f] for f in DEAD_LETTER_FIELDS] == [40, None, None]  # live: the topic's count
    assert [status(aggregate(38, 2, 1))[f] for f in DEAD_LETTER_FIELDS] == [38, 2, 1]  # at the end


def test_wait_conditions_name_the_dead_letter_counts_and_do_not_hold_before_they_are_known():
    condition = parse_condition("dead_lettered>=40 and dead_letter_missing==0")
    assert holds(condition, status(aggregate(40, 0, 0)))
    assert not holds(condition, status(aggregate(39, 0, 0)))
    assert not holds(condition, status(aggregate(40)))  # missing is known at the end only
    assert not holds(parse_condition("dead_lettered>=0"), status(aggregate()))  # no dead-letter queue


def test_the_metrics_endpoint_exports_the_dead_letter_counts_once_known():
    exporter = StatusExporter({"run": "r1"})
    try:
        exporter.update(status(aggregate()))
        assert not [name for name in scrape(exporter.url) if "dead_letter" in name]
        exporter.update(status(aggregate(40)))
        samples = scrape(exporter.url)
        assert samples["dimster_dead_lettered_messages"][1] == 40
        assert "dimster_dead_letter_missing_messages" not in samples
        exporter.update(status(aggregate(38, 2, 1)))
        samples = scrape(exporter.url)
        assert samples["dimster_dead_lettered_messages"][1] == 38
        assert samples["dimster_dead_letter_missing_messages"][1] == 2
        assert samples["dimster_dead_letter_duplicate_messages"][1] == 1
    finally:
        exporter.close()


def test_the_status_line_shows_dlq_only_for_a_run_with_a_dead_letter_queue():
    window = {
        "pubRate": 100.0, "consRate": 100.0, "targetRate": 100.0, "pubRate10s": 100.0, "sent": 1000,
        "received": 990, "backlog": 10, "e2eP50Ms": 1.0, "e2eP99Ms": 2.0, "publishP99Ms": 3.0, "sendErrors": 0,
        "duplicates": 0,
    }  # fmt: skip
    assert "dlq" not in status_line(5.0, "measure", window)
    assert "dlq" not in status_line(5.0, "measure", {**window, "dead_lettered": None})
    assert status_line(5.0, "measure", {**window, "dead_lettered": 1234}).endswith(" | pub p99 3.0 ms | dlq 1,234")


def test_dimster_status_and_the_last_line_name_the_dead_letter_counts_and_the_wrong_ones_when_not_0():
    assert dead_letter_counts({"dead_lettered": None}) == []
    assert dead_letter_counts({"dead_lettered": 40}) == ["dead_lettered 40"]
    assert dead_letter_counts({"dead_lettered": 40, "dead_letter_missing": 0, "dead_letter_duplicates": 0}) == [
        "dead_lettered 40"
    ]
    found = {"dead_lettered": 1200, "dead_letter_missing": 2, "dead_letter_duplicates": 0}
    assert dead_letter_counts(found) == ["dead_lettered 1,200", "dead_letter_missing 2"]

    results = Path("results/r1")
    without = ended_line("completed", TOTALS, results)
    assert "dead_letter" not in without
    assert ended_line("completed", {**TOTALS, **dict.fromkeys(DEAD_LETTER_FIELDS)}, results) == without
    line = ended_line("completed", {**TOTALS, "dead_lettered": 50, "dead_letter_missing": 0,
                                    "dead_letter_duplicates": 3}, results)  # fmt: skip
    assert line == without.replace("duplicates 0;", "duplicates 0, dead_lettered 50, dead_letter_duplicates 3;")


def run_data(totals: dict, account: dict | None = None, queue: dict | None = None) -> RunData:
    summary = {"totals": totals, "share_outcomes": {"accepted": 950, "rejected": 50}, "account": account or {}}
    if queue:
        summary["dead_letter_queue"] = queue
    info = {"final_workload": {"consumerType": "SHARE_GROUP"}}
    return RunData(Path("r1"), info, summary, {}, {}, {})


def test_the_report_shows_the_dead_letter_counts_and_flags_missing_and_duplicated_ones():
    terms = {"acked": 1000, "accepted": 950, "rejected": 50, "archived": 0, "unconsumed": 0, "in_doubt": 0,
             "lost": 0, "closes": True, "unaccounted": 0}  # fmt: skip
    page = key_numbers(run_data(TOTALS, {"g": terms}))
    assert "dead_letter" not in page and "dead-letter" not in page  # a run without a dead-letter queue

    found = {"dead_lettered": 48, "dead_letter_missing": 2, "dead_letter_duplicates": 0}
    account = {"g": {**terms, **found}}
    queue = {"topic": "dlq.r1", "copyRecord": False, "createTopic": True}
    page = key_numbers(run_data({**TOTALS, **found}, account, queue))
    card = '<div class="card bad"><div class="label">dead_lettered</div><div class="value">48</div>'
    assert card + '<div class="label">2 missing</div>' in page
    assert '<span class="bad">2</span>' in page  # missing: in the totals and the group's account
    assert page.count('<span class="bad">2</span>') == 2
    for label, value in (("dead-letter topic", "dlq.r1"), ("dead letters hold", "metadata only"),
                         ("dead-letter topic made by", "dimster")):  # fmt: skip
        assert f"<tr><td>{label}</td><td>{value}</td></tr>" in page
    for name in DEAD_LETTER_FIELDS:
        assert f"<td>{name}</td>" in page and f"<th>{name}</th>" in page  # the totals, the group's account

    clean = key_numbers(run_data({**TOTALS, **found, "dead_letter_missing": 0}, None, queue))
    assert '<div class="card"><div class="label">dead_lettered</div>' in clean  # not flagged

    compared = {label: row for label, row in KEY_ROWS if label in DEAD_LETTER_FIELDS}  # dimster compare
    assert [compared[name](run_data({**TOTALS, **found})) for name in DEAD_LETTER_FIELDS] == ["48", "2", "0"]
    assert compared["dead_lettered"](run_data(TOTALS)) == MISSING


def test_the_campaign_page_compares_dead_lettered_across_points_and_charts_wrong_counts_only_when_any():
    points = pd.DataFrame(
        {
            "point": [1, 2],
            "label": ["dlq=false", "dlq=true"],
            "status": ["completed", "completed"],
            "repeats": [1, 1],
            "consumed_msgs_per_s_mean": [1000.0, 900.0],
            "dead_lettered_mean": [float("nan"), 120.0],
            "dead_letter_missing_mean": [float("nan"), 0.0],
            "dead_letter_duplicates_mean": [float("nan"), 0.0],
        }
    )
    charted = charted_metrics(points)
    assert "dead_lettered" in charted and "dead_letter_missing" not in charted
    points.loc[1, "dead_letter_duplicates_mean"] = 3.0
    assert "dead_letter_duplicates" in charted_metrics(points)
    campaign = {"points": [{"index": i, "repeat": 1, "values": {"dlq": i == 2}, "status": "completed"} for i in (1, 2)]}
    table = point_table(Path("c"), campaign, [], points)
    assert "dead_lettered (records)" in table and "dead_letter_missing (records)" in table
    assert "120" in table
