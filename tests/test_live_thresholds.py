"""Thresholds while load runs (issue 36, item 1): `status` shows each one's value over the measured
phase so far, and an abortOnFail threshold that can no longer pass stops the run cleanly, as its
plan's end would, through the in-memory workers of tests/fake_run.py."""

import json

import pytest

from tests.fake_run import E2E_MS, PER_STEP, STEP_SECONDS, FakeWorkers, coordinator, events

pytestmark = pytest.mark.unit


def test_status_shows_each_threshold_over_the_measured_phase_so_far(tmp_path):
    thresholds = ["e2e.p99 < 50ms", "e2e.p99 < 1ms", "produced.rate > 0 msg/s", "lost == 0", "duplicates == 0"]
    c = coordinator(tmp_path, FakeWorkers(), durationSeconds=3, thresholds=thresholds)
    seen: list[list[dict]] = []
    original = c._print_line

    def line_and_status():
        original()
        seen.append(c.status()["thresholds"])

    c._print_line = line_and_status  # type: ignore[method-assign]
    assert c.run() == 0
    during = [s for s in seen if s and s[0]["value"] is not None]
    assert during, seen
    now = {t["threshold"]: t for t in during[-1]}
    assert now["e2e.p99 < 50ms"]["value"] == pytest.approx(E2E_MS, rel=0.02) and now["e2e.p99 < 50ms"]["passing"]
    assert now["e2e.p99 < 1ms"]["passing"] is False and now["e2e.p99 < 1ms"]["unit"] == "ms"
    assert now["produced.rate > 0 msg/s"]["value"] > 0 and now["produced.rate > 0 msg/s"]["passing"]
    assert now["lost == 0"]["value"] is None and now["lost == 0"]["passing"] is None  # known at the end only
    assert now["duplicates == 0"]["value"] == 0 and now["duplicates == 0"]["passing"]


def test_an_abort_on_fail_threshold_stops_the_run_once_it_cannot_pass(tmp_path):
    """The thresholds are looked at once a second of the fake's clock (its steps under load), not the
    host's: the first look, at step 50, sees 1,000 sent (two producers' PER_STEP a step), however many
    steps a busy host let the loop make in a second."""
    threshold = {"threshold": "sent < 600", "abortOnFail": True}
    look_step = round(1 / STEP_SECONDS)
    workers = FakeWorkers(steps_needed=look_step + 1)  # the duration (a hang guard) cannot end the load first
    c = coordinator(tmp_path, workers, durationSeconds=60, thresholds=[threshold])
    check = c.intake.judge.check
    c.intake.judge.check = lambda phase, status, now: check(phase, status, workers.steps * STEP_SECONDS)
    assert c.run() == 0  # a clean stop: the summary's verdict fails the run (exit 8)
    info = json.loads((c.bundle.path / "run.json").read_text())
    assert info["status"] == "completed" and info["aborted_by"] == "sent < 600"
    kinds = [e["event"] for e in events(c)]
    aborted = next(e for e in events(c) if e["event"] == "threshold_abort")
    assert aborted["threshold"] == "sent < 600" and aborted["value"] >= 600
    # stopped at the first look that saw it broken, the producers told at once: nothing sent after
    assert aborted["value"] == info["totals"]["sent"] == look_step * 2 * PER_STEP
    stopping = next(e for e in events(c) if e["event"] == "stopping")
    assert stopping["reason"] == "threshold" and kinds.index("threshold_abort") < kinds.index("stopping")
    assert info["totals"]["lost"] == 0 and info["totals"]["received"] == info["totals"]["sent"]  # drained


def test_a_run_whose_thresholds_all_can_pass_runs_its_length(tmp_path):
    c = coordinator(tmp_path, FakeWorkers(), thresholds=[{"threshold": "duplicates == 0", "abortOnFail": True}])
    assert c.run() == 0
    info = json.loads((c.bundle.path / "run.json").read_text())
    assert info["aborted_by"] is None and "threshold_abort" not in [e["event"] for e in events(c)]
