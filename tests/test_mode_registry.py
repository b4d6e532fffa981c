"""Run modes as plug points: every registered module offers the whole plug, the workload accepts
exactly the registered modes, and each mode's parts are found through the registry."""

import typing

import pytest

from dimster.report.data import RunData
from dimster.report.html import mode_section
from dimster.workload.model import parse_workload
from dimster.workload.modes import MODES, MODULES, Mode, load_seconds, mode_line, plan_for

pytestmark = pytest.mark.unit

PLUG = ("NAME", "plan", "problem", "line", "panel", "load_seconds")


def test_every_registered_mode_offers_the_whole_plug_and_its_settings_are_in_the_union():
    settings = typing.get_args(typing.get_args(Mode)[0])
    names = {typing.get_args(s.model_fields["type"].annotation)[0] for s in settings}
    assert names == set(MODES) == {"steady", "explore-limits", "drain-backlog", "max-rate", "correctness"}
    for name, module in MODULES.items():
        assert name == module.NAME and all(callable(getattr(module, part)) for part in PLUG[1:])


@pytest.mark.parametrize(
    ("mode", "plan_name"),
    [
        ({"type": "steady"}, "steady"),
        ({"type": "explore-limits", "targetE2eP99Ms": 50}, "explore-limits"),
        ({"type": "drain-backlog", "backlogRecords": 1000}, "drain-backlog"),
        ({"type": "max-rate"}, "max-rate"),
        ({"type": "correctness"}, "correctness"),
    ],
)
def test_each_mode_gives_its_plan_and_an_estimate(mode, plan_name):
    workload = parse_workload({"name": "w", "mode": mode, "producerRate": 100}, "test")
    assert plan_for(workload).name == plan_name
    assert load_seconds(workload) > 0


def test_a_mode_refuses_what_the_rest_of_the_workload_does_not_allow():
    with pytest.raises(Exception, match="mode correctness needs messageSize of at least"):
        parse_workload({"name": "w", "mode": "correctness", "messageSize": 24}, "test")
    with pytest.raises(Exception, match="mode drain-backlog needs producers and consumers"):
        drain = {"type": "drain-backlog", "backlogRecords": 5}
        parse_workload({"name": "w", "mode": drain, "consumersPerGroup": 0}, "test")


def test_the_explore_limits_panel_lists_each_step_in_the_report(tmp_path):
    step = {
        "step": 1, "rate": 1000.0, "passed": False, "published_msgs_per_s": 990.5, "consumed_msgs_per_s": 800.25,
        "e2e_p99_ms": 75.0, "backlog_growth_msgs_per_s": 190.0, "drain": {"outcome": "drained"},
        "reasons": ["e2e p99 75 ms over 50 ms"],
    }  # fmt: skip
    mode = {"type": "explore-limits", "verdict": "limit 500 msg/s", "step_count": 1, "steps": [step]}
    assert mode_line(mode) == "explore-limits: limit 500 msg/s over 1 step(s)"
    run = RunData.__new__(RunData)
    run.run_info = {"mode": mode}
    html = mode_section(run)
    assert "Test mode: explore-limits" in html and "e2e p99 75 ms over 50 ms" in html
    assert html.count("<tr") == 2 and "fail" in html and "drained" in html
