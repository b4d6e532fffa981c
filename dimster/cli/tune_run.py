"""`dimster tune` without --dry-run: the workload runs in the background as `dimster run --detach` runs
it (checked as `dimster run` checks it, for at most `--budget` seconds of load), the live tuner pulls
its levers through the run's control API, the run is stopped as `dimster stop` stops it, and the tuned
workload and the tuner's path are written into its results folder."""

import contextlib
import json
from pathlib import Path

from dimster.cli.control import stop_run
from dimster.cli.output import console, err_console, print_json
from dimster.cli.run import check_for_start, start_detached
from dimster.coordinator.control.run_state import control_request
from dimster.environment import EnvironmentProfile
from dimster.errors import DimsterError
from dimster.paths import display
from dimster.tuning.levers import Lever
from dimster.tuning.live import LiveTuner, Tuned, unplanned
from dimster.tuning.tuned_file import brokers_known, tuned_broker_config_text, tuned_workload_text
from dimster.verdict.expressions import Comparison
from dimster.workload.model import Workload


class RunOf:
    """The run of an environment through its control API (RunControl)."""

    def __init__(self, env: str, results: Path):
        self.env, self.events = env, results / "events.jsonl"

    def status(self) -> dict:
        return control_request(self.env, "GET", "/status", timeout=30)

    def modify(self, pairs: list[tuple[str, str]]) -> dict:
        return control_request(self.env, "POST", "/modify", {"sets": pairs, "by": "tune"}, timeout=60)

    def redeploys(self) -> tuple[int, int]:
        """The run's broker redeploys done and failed, as its events say (the scenario script's way)."""
        events = self.events.read_text() if self.events.exists() else ""
        return events.count('"broker_redeploy_done"'), events.count('"broker_redeploy_failed"')

    def tell(self, event: str, line: str) -> None:
        """A tuner's step as one of the run's events (and its console's lines)."""
        control_request(self.env, "POST", "/event", {"event": event, "message": line}, timeout=30)


def tune_run(
    profile: EnvironmentProfile,
    path: Path,
    w: Workload,
    sets: list[tuple[str, str]],
    goals: list[Comparison],
    levers: list[Lever],
    values: dict[str, int | str],
    budget: float,
    no_summary: bool,
    settle: float,
    results: Path,
    as_json: bool = False,
) -> Tuned:
    env = profile.name
    check_for_start(w, profile, display(path))
    out = err_console if as_json else console  # --json: the lines on stderr, the path on stdout
    say = lambda line: out.print(line, markup=False)  # noqa: E731
    for text in unplanned(goals):
        say(f"note: '{text}' is not predicted by the model: the tuner judges it as measured")
    run_sets = [*sets, ("durationSeconds", str(budget))]
    started = start_detached(env, path, run_sets, results.resolve(), ["--no-summary"] * no_summary)
    say(f"tuning run {started['runId']} on '{env}'; console: {started['console']}")
    folder = Path(started["results"])
    run = RunOf(env, folder)

    def tell(event: str, line: str) -> None:
        say(line)
        run.tell(event, line)

    try:
        tuned = LiveTuner(run, w, goals, levers, values, tell=tell, settle_seconds=settle, measure_seconds=settle).run()
    except BaseException:  # the run is stopped all the same, and the first error is the one told
        with contextlib.suppress(DimsterError):
            stop_run(env, 600)
        raise
    stop_run(env, 600)
    reasons = {
        t.step.lever: t.step.why or "a measured search's trial that raised the rate" for t in tuned.taken if t.kept
    }
    (folder / "tuned-workload.yaml").write_text(tuned_workload_text(path, tuned.changes, reasons))
    broker_file, overrides = brokers_known(profile)
    broker_text = tuned_broker_config_text(broker_file, overrides, tuned.changes, reasons)
    (folder / "broker-config.yaml").write_text(broker_text)
    path_taken = [
        {**t.step.__dict__, "measured": t.measured, "drain": t.drain, "by": t.by, "kept": t.kept} for t in tuned.taken
    ]
    record = {
        "met": tuned.met,
        "reason": tuned.reason,
        "limit": tuned.limit,
        "changes": tuned.changes,
        "steps": path_taken,
    }
    (folder / "tuning.json").write_text(json.dumps(record, indent=2) + "\n")
    if as_json:
        files = {
            "tunedWorkload": str(folder / "tuned-workload.yaml"),
            "brokerConfig": str(folder / "broker-config.yaml"),
        }
        print_json({**record, "results": str(folder), **files})
    say(f"{'met' if tuned.met else 'not met'}: {tuned.reason}; binding: {tuned.limit}")
    say(f"tuned workload: {folder / 'tuned-workload.yaml'}; brokers: {folder / 'broker-config.yaml'}")
    say(f"the path: {folder / 'tuning.json'}")
    return tuned
