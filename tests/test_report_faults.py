"""The report's figures around each fault (report/faults.py): known per-second series and fault events
in, the exact produced and consumed msg/s, worst e2e p99, highest backlog and lag, and longest stretch
without consumption of each window out. No Kafka, no Spark, no browser."""

from pathlib import Path

import pandas as pd
import pytest

from dimster.report.data import RunData
from dimster.report.faults import (
    WINDOW_SECONDS,
    FailedStep,
    Step,
    Window,
    around_faults,
    failed_steps,
    with_heals,
)
from dimster.report.faults_section import faults_section
from dimster.report.html import write_report
from tests.report_runs import LOAD_STARTED, Scenario, write_run

pytestmark = pytest.mark.unit

T0 = 1_795_000_000.0  # epoch seconds at which load started (run times below are exact in binary)


def fault(at: float, action: str, node: int, seconds: float | None = 0.0) -> dict:
    """A `fault` event as the faults runner records it: `began` at run time `at`, recorded when done."""
    event = {"time": T0 + at + (seconds or 0.0), "event": "fault", "action": action, "node": node, "began": T0 + at}
    if seconds is not None:
        event["seconds"] = seconds
    return event


def failed(at: float, action: str, node: int) -> dict:
    message = f"fault {action} of node {node} failed: no such process"
    return {"time": T0 + at, "event": "fault_failed", "action": action, "node": node, "message": message}


def make_run(
    events: list[dict],
    seconds: int = 60,
    sent: dict[int, float] | None = None,
    received: dict[int, float] | None = None,
    backlog: dict[int, float] | None = None,
    e2e_p99: dict[int, float] | None = None,
    lag: pd.DataFrame | None = None,
    without: tuple[int, ...] = (),
) -> RunData:
    """A run of `seconds` seconds at 100 msg/s produced and consumed, backlog 10 and e2e p99 10 ms,
    but for the seconds given; the seconds in `without` are missing from the throughput table."""
    sent, received, backlog, e2e_p99 = sent or {}, received or {}, backlog or {}, e2e_p99 or {}
    rows = [
        {"second": s, "sent": sent.get(s, 100), "received": received.get(s, 100), "backlog": backlog.get(s, 10)}
        for s in range(seconds)
        if s not in without
    ]
    latency = [{"second": s, "metric": "e2e", "p50": 1.0, "p99": e2e_p99.get(s, 10.0)} for s in range(seconds)]
    latency += [{"second": s, "metric": "publish", "p50": 1.0, "p99": 5000.0} for s in range(seconds)]  # not e2e
    tables = {"throughput_per_second": pd.DataFrame(rows), "latency_per_second": pd.DataFrame(latency)}
    if lag is not None:
        tables["broker_lag"] = lag
    timeline = {"events": [{"time": T0, "event": "load_started"}, *events], "modifications": []}
    return RunData(Path("run"), {"load_started": T0}, {}, tables, {}, timeline)


def figures(window: Window | None) -> tuple | None:
    if window is None:
        return None
    w = window
    return (w.start, w.end, w.produced, w.consumed, w.e2e_p99_ms, w.backlog, w.brokers_lag, w.without_consumption)


def test_a_kill_and_its_heal_before_during_and_after():
    """Node 2 killed at 15.5 s, started again at 35.0 s, registered 6.2 s later (41.2 s): during is
    seconds 15 to 41, before 5 to 14, after 42 to 51. Nothing consumed for 7 s, then a catch-up."""
    stall = range(20, 27)
    run = make_run(
        [fault(15.5, "kill", 2, 0.1), fault(35.0, "start", 2, 6.2)],
        sent={s: 50 for s in stall},
        received={**{s: 0 for s in stall}, 27: 300, 28: 300},
        backlog={**{s: (s - 19) * 50 for s in stall}, 27: 150},
        e2e_p99={27: 900.0, 28: 300.0, 50: 40.0},
        lag=pd.DataFrame(
            {
                "group": ["a", "b"] * 12,
                "run_time_s": [t + 0.2 for t in range(0, 60, 5) for _ in "ab"],
                "lag": [400 if t == 25 and g == "a" else 100 if t == 25 else 1 for t in range(0, 60, 5) for g in "ab"],
            }
        ),
    )
    [found] = around_faults(run)
    assert found.step == Step(15.5, 2, "kill", 0.1)
    assert found.heal == Step(35.0, 2, "start", 6.2)
    assert found.overlapping == []
    assert figures(found.before) == (5, 15, 100.0, 100.0, 10.0, 10, 2.0, 0)
    # 27 seconds: 7 at 50 msg/s produced, 7 with nothing consumed and 2 at 300
    produced, consumed = (27 * 100 - 7 * 50) / 27, (27 * 100 - 7 * 100 + 2 * 200) / 27
    assert figures(found.during) == (15, 42, pytest.approx(produced), pytest.approx(consumed), 900.0, 350, 500.0, 7)
    assert figures(found.after) == (42, 52, 100.0, 100.0, 40.0, 10, 2.0, 0)


def test_a_restart_heals_itself_in_the_steps_own_time():
    """Restart of node 1 at 12.25 s that served again 7.9 s later (20.15 s): during is seconds 12 to 20."""
    run = make_run([fault(12.25, "restart", 1, 7.9)], received={14: 0, 15: 0, 17: 0})
    [found] = around_faults(run)
    assert found.heal is None and not found.needs_heal
    assert figures(found.before) == (2, 12, 100.0, 100.0, 10.0, 10, None, 0)
    assert figures(found.during) == (12, 21, 100.0, 600 / 9, 10.0, 10, None, 2)
    assert figures(found.after) == (21, 31, 100.0, 100.0, 10.0, 10, None, 0)


def test_a_fault_at_the_start_of_the_run_has_no_before_window():
    run = make_run([fault(0.0, "pause", 1), fault(3.0, "resume", 1)], received={0: 0, 1: 0, 2: 0})
    [found] = around_faults(run)
    assert found.before is None
    assert figures(found.during) == (0, 3, 100.0, 0.0, 10.0, 10, None, 3)
    assert figures(found.after) == (3, 13, 100.0, 100.0, 10.0, 10, None, 0)


def test_a_before_window_cut_by_the_start_of_the_run_is_shorter():
    [found] = around_faults(make_run([fault(4.5, "restart", 1, 0.2)], received={1: 0}))
    assert figures(found.before) == (0, 4, 100.0, 75.0, 10.0, 10, None, 1)
    assert figures(found.during) == (4, 5, 100.0, 100.0, 10.0, 10, None, 0)  # at least the second it began in


def test_a_fault_never_healed_lasts_to_the_end_of_the_run_and_has_no_after_window():
    run = make_run([fault(40.5, "kill", 3)], received={s: 0 for s in range(50, 60)})
    [found] = around_faults(run)
    assert found.heal is None and found.needs_heal
    assert figures(found.before) == (30, 40, 100.0, 100.0, 10.0, 10, None, 0)
    assert figures(found.during) == (40, 60, 100.0, 50.0, 10.0, 10, None, 10)
    assert found.after is None


def test_an_after_window_cut_by_the_end_of_the_run():
    [found] = around_faults(make_run([fault(50.0, "pause", 2), fault(55.5, "resume", 2, 0.0)]))
    assert (found.during.start, found.during.end) == (50, 56)
    assert (found.after.start, found.after.end) == (56, 60)
    late = around_faults(make_run([fault(50.0, "pause", 2), fault(59.5, "resume", 2, 1.0)]))[0]
    assert late.after is None  # healed when the data had ended


def test_two_overlapping_faults_each_get_their_own_windows():
    """Node 2 paused 10.0 to 30.0 s; node 3 killed at 20.5 s, started at 25.0 s and back at 29.0 s.
    Consumption stops 21 to 24."""
    run = make_run(
        [fault(10.0, "pause", 2), fault(20.5, "kill", 3), fault(25.0, "start", 3, 4.0), fault(30.0, "resume", 2)],
        received={s: 0 for s in range(21, 25)},
        e2e_p99={26: 700.0},
    )
    pause, kill = around_faults(run)
    assert pause.step.label == "node 2 pause" and pause.heal == Step(30.0, 2, "resume", 0.0)
    assert kill.step.label == "node 3 kill" and kill.heal == Step(25.0, 3, "start", 4.0)
    assert pause.overlapping == [kill.step] and kill.overlapping == [pause.step]
    assert figures(pause.before) == (0, 10, 100.0, 100.0, 10.0, 10, None, 0)
    assert figures(pause.during) == (10, 30, 100.0, 80.0, 700.0, 10, None, 4)
    assert figures(pause.after) == (30, 40, 100.0, 100.0, 10.0, 10, None, 0)
    assert figures(kill.before) == (10, 20, 100.0, 100.0, 10.0, 10, None, 0)
    assert figures(kill.during) == (20, 29, 100.0, 500 / 9, 700.0, 10, None, 4)
    assert figures(kill.after) == (29, 39, 100.0, 100.0, 10.0, 10, None, 0)


def test_faults_one_after_the_other_do_not_overlap():
    run = make_run([fault(10.0, "pause", 2), fault(15.0, "resume", 2), fault(15.2, "restart", 2, 3.0)])
    pause, restart = around_faults(run)
    assert (pause.during.start, pause.during.end, restart.during.start, restart.during.end) == (10, 15, 15, 19)
    assert pause.overlapping == [] and restart.overlapping == []


def test_a_failed_step_gets_no_row_and_is_listed_as_failed():
    """A kill that could not happen has no row; a pause whose resume failed is never healed."""
    run = make_run([failed(5.0, "kill", 2), fault(10.0, "pause", 3), failed(30.0, "resume", 3)])
    [found] = around_faults(run)
    assert found.step == Step(10.0, 3, "pause", 0.0) and found.heal is None and found.after is None
    assert failed_steps(run) == [
        FailedStep(5.0, 2, "kill", "fault kill of node 2 failed: no such process"),
        FailedStep(30.0, 3, "resume", "fault resume of node 3 failed: no such process"),
    ]


def test_a_second_missing_from_the_throughput_table_had_nothing_produced_or_consumed():
    [found] = around_faults(make_run([fault(30.0, "restart", 1, 0.5)], without=(35, 36)))
    assert figures(found.after) == (31, 41, 80.0, 80.0, 10.0, 10, None, 2)


def test_each_fault_takes_the_first_later_heal_of_its_own_node():
    steps = [
        Step(1.0, 2, "kill"),
        Step(2.0, 3, "kill"),
        Step(3.0, 3, "start"),
        Step(4.0, 2, "resume"),  # heals no kill: a row of its own
        Step(5.0, 2, "start"),
        Step(6.0, 1, "restart"),
    ]
    assert with_heals(steps) == [
        (steps[0], steps[4]),
        (steps[1], steps[2]),
        (steps[3], None),
        (steps[5], None),
    ]


def test_a_fault_from_another_terminal_has_no_step_time():
    """`dimster cluster pause` tells the run when it is done: no `began`, no `seconds`."""
    events = [
        {"time": T0 + 20.75, "event": "fault", "action": "pause", "node": 2},
        {"time": T0 + 31.25, "event": "fault", "action": "resume", "node": 2},
    ]
    [found] = around_faults(make_run(events))
    assert found.step == Step(20.75, 2, "pause", None) and found.heal == Step(31.25, 2, "resume", None)
    assert (found.during.start, found.during.end) == (20, 32)


def test_the_faults_section_shows_rows_and_failed_steps():
    run = make_run(
        [fault(15.5, "kill", 2, 0.1), fault(35.0, "start", 2, 6.2), fault(40.5, "pause", 3), failed(50.0, "kill", 1)],
        received={s: 0 for s in range(20, 27)},
    )
    html = faults_section(run)
    assert html.startswith('<section id="faults"><h2>Faults</h2>')
    assert html.count('<tbody><tr><td class="text" rowspan="3">') == 2  # the kill and the pause, 3 rows each
    assert "start at 35.0 s, took 6.20 s" in html
    assert '<span class="bad">not in the run</span>' in html  # the pause was never healed
    assert '<span class="bad">7</span>' in html  # 7 s without consumption
    assert "fault kill of node 1 failed: no such process" in html
    assert f"the {WINDOW_SECONDS} s before" in html


def test_a_run_without_faults_has_no_faults_section():
    assert faults_section(make_run([])) == ""
    assert "Failed steps" in faults_section(make_run([failed(5.0, "kill", 2)]))


def test_the_report_of_a_run_with_a_fault_has_the_section(tmp_path):
    at = LOAD_STARTED
    events = [
        (45.0, "fault", {"action": "kill", "node": 2, "began": at + 45.0, "seconds": 0.1}),
        (70.0, "fault", {"action": "start", "node": 2, "began": at + 64.0, "seconds": 6.0}),
    ]
    page = write_report(write_run(tmp_path, Scenario(events=events))).read_text()
    assert '<section id="faults">' in page
    assert "start at 64.0 s, took 6.00 s" in page
    assert "<td>35 to 45</td>" in page and "<td>45 to 70</td>" in page and "<td>70 to 80</td>" in page
    assert '<section id="faults">' not in write_report(write_run(tmp_path, Scenario(name="calm"))).read_text()
