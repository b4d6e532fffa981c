"""The live tuner's loop (tuning/live.py) against an in-memory run of our control seam: a run whose
consumption is what dimster's own model predicts for its settings as they are now, or less (a cause
the model does not know). It pulls the model's step while the model explains the run, says so when it
does not and searches by measurement, putting back what does not help, and ends met or saying why."""

import pytest

from dimster.tuning.levers import parse_lever
from dimster.tuning.live import LiveTuner
from dimster.tuning.plan import consumed, lever_values, parse_goals, predict, with_values
from dimster.workload.model import Workload
from tests.share_cases import LOCK_BUDGET, LOCKS, PROCESSING

pytestmark = pytest.mark.unit


class ModelRun:
    """A run of our control seam whose consumption is the model's for its workload now, at most `cap`."""

    def __init__(self, w: Workload, cap: float = float("inf")):
        self.w, self.cap, self.now = w, cap, 0.0
        self.modified: list[tuple[float, list[tuple[str, str]]]] = []

    def rate(self) -> float:
        return min(self.cap, consumed(self.w, predict(self.w, lever_values(self.w, {}))[0]))

    def status(self) -> dict:
        rate = self.rate()
        figures = {"consumed.rate": rate, "produced.rate": self.w.producer_rate}
        return {"phase": "measure", "rateSeconds": 5.0, "consRate": rate, "figures": figures}

    def modify(self, pairs: list[tuple[str, str]]) -> dict:
        self.modified.append((self.now, pairs))
        self.w = with_values(self.w, dict(pairs))
        return {"applied": [{"key": k, "new": v} for k, v in pairs]}

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def tuner(run: ModelRun, goals: list[str], levers: list[str], said: list[str]) -> LiveTuner:
    values = lever_values(run.w, {})
    return LiveTuner(
        run, run.w, parse_goals(goals), [parse_lever(t, values) for t in levers], values,
        tell=lambda event, line: said.append(f"{event} {line}"), clock=lambda: run.now, sleep=run.sleep,
    )  # fmt: skip


def test_the_model_s_step_is_pulled_measured_after_it_settles_and_ends_met():
    run, said = ModelRun(Workload.model_validate(LOCK_BUDGET)), []
    result = tuner(run, ["consumed.rate >= 0.95 * produced.rate"], [LOCKS, "consumersPerGroup"], said).run()
    assert result.met and result.measured == 700
    [(at, [(key, value)])] = run.modified
    assert key == LOCKS and 310 <= int(value) <= 412
    assert at >= 20  # the first status read once 10 s settled and 10 s measured
    [taken] = result.taken
    assert taken.by == "model" and taken.explained and taken.measured == taken.step.predicted == 700
    assert result.changes == {LOCKS: int(value)}
    assert said[0].startswith(f"tune_step model: {LOCKS} 100 -> {value}: predicted 700 msg/s, measured 700")


def test_a_run_the_model_does_not_explain_is_searched_by_measurement_and_what_does_not_help_is_put_back():
    """The run consumes at most 450 msg/s whatever the settings: the model's 4 lanes predict 700 and
    measure 450, so the tuner says the model does not explain it and tries the cheapest next values,
    each put back when the rate does not rise, until the levers are spent."""
    run, said = ModelRun(Workload.model_validate(PROCESSING), cap=450), []
    levers = ["consumerProcParallelism=1..6", "consumersPerGroup=1..2"]
    result = tuner(run, ["consumed.rate >= 600msg/s"], levers, said).run()
    assert not result.met and result.reason == "no allowed change lifts the measured rate"
    first, *trials = result.taken
    assert (first.by, first.step.lever, first.step.after, first.measured) == (
        "model",
        "consumerProcParallelism",
        4,
        450,
    )
    assert not first.explained and first.kept
    assert any(line.startswith("tune_model_off the model does not explain this run") for line in said)
    assert [(t.step.lever, t.step.after) for t in trials] == [
        ("consumerProcParallelism", 5), ("consumerProcParallelism", 6), ("consumersPerGroup", 2)
    ]  # fmt: skip
    assert all(t.by == "search" and not t.kept and t.measured == 450 for t in trials)
    assert run.w.consumer_proc_parallelism == 4 and run.w.consumers_per_group == 1  # each trial put back
    assert result.changes == {"consumerProcParallelism": 4}


def test_goals_that_hold_from_the_start_change_nothing():
    run = ModelRun(Workload.model_validate({**PROCESSING, "consumerProcParallelism": 8}))
    result = tuner(run, ["consumed.rate >= 600msg/s"], ["consumersPerGroup"], []).run()
    assert result.met and run.modified == [] and result.taken == []


def test_the_tuned_workload_is_the_original_with_each_change_commented_and_it_loads(tmp_path):
    import yaml

    from dimster.tuning.tuned_file import tuned_workload_text
    from dimster.workload.model import load_workload

    original = tmp_path / "locks.yaml"
    original.write_text(yaml.safe_dump(LOCK_BUDGET, sort_keys=False))
    changes = {LOCKS: 412, "consumerProcParallelism": 2}
    reasons = {LOCKS: "lock budget binds (200 -> 700 msg/s)", "consumerProcParallelism": "a trial that raised the rate"}
    tuned = tmp_path / "tuned.yaml"
    tuned.write_text(tuned_workload_text(original, changes, reasons))
    text = tuned.read_text()
    assert text.splitlines()[0] == "# locks.yaml as dimster tune left it: 2 change(s)"
    assert "\n  share.partition.max.record.locks: 412  # tuned: lock budget binds (200 -> 700 msg/s)\n" in text
    assert "consumerProcParallelism: 2  # tuned: a trial that raised the rate" in text
    w = load_workload(tuned)
    assert w.group_config["share.partition.max.record.locks"] == 412 and w.consumer_proc_parallelism == 2
    assert w.consumers_per_group == 4 and w.kafka_config.share_consumer_config["max.poll.records"] == 100


def test_a_run_the_model_does_not_explain_from_the_start_is_searched_at_once():
    """Measured 100 msg/s where the model predicts 200 for the settings as they are: no model step."""
    run, said = ModelRun(Workload.model_validate(PROCESSING), cap=100), []
    result = tuner(run, ["consumed.rate >= 600msg/s"], ["consumerProcParallelism=1..2"], said).run()
    assert said[0] == (
        "tune_model_off the model does not explain this run: it predicts 200 msg/s for its settings, "
        "and 100 were measured; searching by measurement"
    )
    assert [(t.by, t.step.after, t.kept) for t in result.taken] == [("search", 2, False)]
    assert not result.met and run.w.consumer_proc_parallelism == 1
