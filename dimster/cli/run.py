"""`dimster run`: workloads from YAML (their options `dimster validate` shares)."""

import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dimster.cli.output import SparkMasterOpt, console, print_json, progress
from dimster.clock import Deadline
from dimster.coordinator.control.run_state import console_log, control_request, read_run_state
from dimster.errors import DimsterError
from dimster.paths import check_environment_name, display, project_dir
from dimster.results.redaction import redact_argv
from dimster.workload.overrides import parse_set_arguments

if TYPE_CHECKING:
    from dimster.environment import EnvironmentProfile
    from dimster.workload.model import Workload

SetOpt = typer.Option(
    None,
    "--set",
    "-s",
    help="Override workload keys: `k=v [k=v ...]` or `k v`; dotted paths (kafkaConfig.producerConfig.linger.ms=10).",
)


def set_items(ctx: typer.Context, set_: list[str] | None) -> list[tuple[str, str]]:
    """`--set a=1 b=2` and `--set k v`: click gives the first item to --set, the rest as extra arguments."""
    if ctx.args and not set_:
        raise DimsterError(f"unexpected argument(s): {' '.join(ctx.args)}")
    return parse_set_arguments([*(set_ or []), *ctx.args])


WorkersOpt = typer.Option(
    None,
    "--workers",
    help="Worker processes (or worker containers) for this run instead of the environment's count.",
    show_default=False,
)

DriverOpt = typer.Option(
    None, "--driver", help="An OpenMessaging Benchmark Kafka driver file: the run's client and topic settings."
)
OmbResultOpt = typer.Option(False, "--omb-result", help="Also write omb-result.json (OMB's TestResult format).")
HANDOFF = "--sets-on-stdin"  # `--detach` hands its child the --set pairs over a pipe, never its command line


def run(
    ctx: typer.Context,
    env: str = typer.Argument(..., help="Environment name: run/environments/ENV.yaml.", show_default=False),
    workload: Path = typer.Option(None, "--workload", "-w", help="Workload YAML file.", show_default=False),
    set_: list[str] = SetOpt,
    results: Path = typer.Option(None, "--results", help="Folder for results bundles (default: results/)."),
    modify: bool = typer.Option(False, "--modify", help="Change the running workload of ENV with --set."),
    detach: bool = typer.Option(False, "--detach", help="Return once load flows; the run goes on in the background."),
    json: bool = typer.Option(False, "--json", help="With --modify or --detach: print JSON."),
    no_summary: bool = typer.Option(False, "--no-summary", help="Skip the Spark summary at the end."),
    workers: int = WorkersOpt,
    spark_master_: str = SparkMasterOpt,
    junit: Path = typer.Option(None, "--junit", help="Write the thresholds' verdict as JUnit XML to this file."),
    driver: Path = DriverOpt,
    omb_result: bool = OmbResultOpt,
    handed: bool = typer.Option(False, HANDOFF, hidden=True, help="Read --set pairs from stdin (--detach's child)."),
) -> None:
    """Run a workload against the cluster of ENV (brought up, or reused if it runs), or with --modify
    change the workload that runs there."""
    check_environment_name(env)
    sets = set_items(ctx, set_) + (_take_handoff() if handed else [])
    if modify:
        if workers is not None:
            raise DimsterError("--workers is set when a run starts; --modify changes clients, not workers")
        return _modify(env, workload, sets, json)
    from dimster.coordinator.control.api import ControlServer
    from dimster.environment import load_environment, with_worker_count
    from dimster.pipeline.spark import spark_master
    from dimster.workload.model import load_workload

    if workload is None:
        raise DimsterError("dimster run needs a workload: -w WORKLOAD.yaml (or --modify --set k=v to change a run)")
    notes: list[str] = []
    loaded = load_workload(workload, sets, driver, omb_result, notes)
    for note in notes:
        progress(f"note: {note}")
    profile = with_worker_count(load_environment(env), workers)
    # a --detach parent judged the properties before it started this process (a Java check: 2 s)
    check_for_start(loaded, profile, display(workload), properties=not handed)
    results_root = (results or project_dir() / "results").resolve()
    child_options = [] if not no_summary else ["--no-summary"]
    if spark_master_:
        child_options += ["--spark-master", spark_master_]
    if workers is not None:
        child_options += ["--workers", str(workers)]
    if junit is not None:
        child_options += ["--junit", str(junit.resolve())]
    if driver is not None:
        child_options += ["--driver", str(driver.resolve())]
    if omb_result:
        child_options += ["--omb-result"]
    if detach:
        return _detach(env, workload, sets, results_root, json, child_options)
    control = ControlServer(env)
    console_output = str(console_log(env)) if handed else None  # a detached run's stdout and stderr
    control.start(
        {"run_id": None, "results": None, "workload": loaded.name, "phase": "starting", "console": console_output}
    )
    summary_master = None if no_summary else spark_master(spark_master_)
    try:
        _run(loaded, profile, results_root, control, summary_master, junit)
    finally:
        control.close()


def _run(loaded, profile, results_root: Path, control, summary_master: str | None, junit: Path | None) -> None:
    from dimster.cli.summary import check_verdict, import_ahead, summarize_after_run, write_run_junit
    from dimster.coordinator.loop.one_run import run_workload
    from dimster.pipeline.spark_service import SparkService, start_ahead_for

    say = lambda line: console.print(line, markup=False)  # noqa: E731

    def started() -> None:  # the summary's Spark and libraries start as the run does, warm by its end
        start_ahead_for(summary_master)
        if summary_master is not None:
            import_ahead()

    try:
        outcome = run_workload(loaded, profile, results_root, control, say, progress, on_started=started)
    finally:
        SparkService.settle_ahead()
    summary = None
    if summary_master and (outcome.bundle / "metrics").exists():
        summary = summarize_after_run(outcome.bundle, summary_master)
    if junit is not None:
        write_run_junit(junit, outcome.bundle, summary, [(t.threshold, t.abort_on_fail) for t in loaded.thresholds])
    if outcome.failure:
        raise DimsterError(outcome.failure, exit_code=outcome.exit_code)
    if loaded.thresholds and not outcome.exit_code:  # a failed run's exit code says more than its thresholds
        if summary_master is None:
            say(f"note: thresholds not judged (--no-summary): `dimster summarize {outcome.bundle}` judges them")
        else:
            check_verdict(outcome.bundle, summary)
    raise typer.Exit(outcome.exit_code)


def _modify(env: str, workload: Path | None, sets: list[tuple[str, str]], as_json: bool) -> None:
    if workload is not None:
        raise DimsterError("--modify changes the workload already running on ENV: drop -w")
    if not sets:
        raise DimsterError("--modify needs changes: --set k=v [k=v ...]")
    answer = control_request(env, "POST", "/modify", {"sets": sets})
    if as_json:
        print_json(answer)
        return
    for change in answer["applied"]:
        at = datetime.fromtimestamp(change["applied"]).strftime("%H:%M:%S.%f")[:-3]
        console.print(f"{at} {change['key']}: {change['old']} -> {change['new']} ({change['effect']})", markup=False)
    for note in answer.get("notes", []):
        console.print(note, markup=False)


def _take_handoff() -> list[tuple[str, str]]:
    """The `--set` pairs a `--detach` parent wrote to this process's stdin, which keeps them off its
    command line (`ps` shows that to every user) and off disk. The parent's own command line, masked,
    becomes this one's, as the results bundle records it."""
    try:
        handoff = json.loads(sys.stdin.read())
        sys.argv = [str(arg) for arg in handoff["argv"]]
        return [(str(key), str(value)) for key, value in handoff["sets"]]
    except (ValueError, TypeError, KeyError):
        raise DimsterError(f"{HANDOFF} reads what `dimster run --detach` writes, not this") from None


def check_for_start(w: "Workload", profile: "EnvironmentProfile", source: str, properties: bool = True) -> None:
    """What a run checks before it starts anything: the clients' versions, the replication, and (unless
    judged already) the client, group and topic properties, each a DimsterError naming `source`."""
    from dimster.clients.properties import check_client_configs
    from dimster.coordinator.loop.one_run import check_client_versions, check_group_and_topic_configs, check_replication

    check_client_versions(w, profile)  # before the property check fetches any version
    check_replication(w, profile, source)
    if properties:
        check_client_configs(w, source, profile.kafka_version)
        check_group_and_topic_configs(w, source, profile.kafka_version)


def _detach(
    env: str, workload: Path, sets: list[tuple[str, str]], results_root: Path, as_json: bool, child_options: list[str]
) -> None:
    """Start the run as a background process; return once its load flows."""
    answer = start_detached(env, workload, sets, results_root, child_options)
    if as_json:
        print_json(answer)
    else:
        console.print(
            f"run {answer['runId']} is running on '{env}' (pid {answer['pid']}); results in "
            f"{answer['results']}; console: {answer['console']}",
            markup=False,
        )


def start_detached(
    env: str, workload: Path, sets: list[tuple[str, str]], results_root: Path, child_options: list[str]
) -> dict:
    """Start the run as a background process; once its load flows, its id, results, pid and console."""
    if (existing := read_run_state(env)) is not None:
        raise DimsterError(
            f"a run is already active for '{env}' (run {existing['run_id']}); `dimster stop {env}` first"
        )
    log = console_log(env)
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "dimster",
        "run",
        env,
        "-w",
        str(workload.resolve()),
        "--results",
        str(results_root),
    ]
    command += [*child_options, HANDOFF]
    handoff = json.dumps({"sets": sets, "argv": redact_argv(sys.argv)})
    with open(log, "w") as out:
        child = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, text=True
        )
    try:
        with child.stdin:  # type: ignore[union-attr]  # stdin=PIPE
            child.stdin.write(handoff)  # type: ignore[union-attr]
    except BrokenPipeError:  # the child ended at once: its log says why, below
        pass
    deadline = Deadline(600)
    while not deadline.passed():
        state = read_run_state(env)
        if state and state.get("pid") == child.pid and state.get("phase") == "running":
            return {"runId": state["run_id"], "results": state["results"], "pid": child.pid, "console": str(log)}
        if child.poll() is not None:
            last = [line for line in log.read_text().splitlines() if line.strip()][-3:]
            raise DimsterError(
                f"the run exited before load started (code {child.returncode}): {last[-1] if last else 'no output'}",
                exit_code=child.returncode or 4,
            )
        time.sleep(0.2)
    raise DimsterError(f"the run did not start load within 600 s; see {log}")
