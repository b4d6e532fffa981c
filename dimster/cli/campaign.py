"""`dimster campaign ENV -c FILE`: run one workload at every point of its dimensions, then summarize
all runs with one Spark job into campaign/summary/ and campaign.html."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dimster.campaign.omb_files import copy_omb_results, write_omb_campaign
from dimster.cli.output import console, err_console, print_json, progress
from dimster.cli.run import WorkersOpt
from dimster.cli.summary import (
    SparkMasterOpt,
    campaign_not_judged,
    check_campaign_verdict,
    summarize_campaign_folder,
    write_campaign_page_line,
)
from dimster.environment import load_environment, with_worker_count
from dimster.errors import DimsterError
from dimster.paths import check_environment_name, project_dir
from dimster.pipeline.spark import spark_master
from dimster.yamlfile import closest

if TYPE_CHECKING:
    from dimster.campaign.model import Campaign
    from dimster.campaign.runner import CampaignFolder

OMB_OPTIONS = ("--omb", "--driver", "--set")  # read from the command's extra arguments, several values each
EPILOG = """\b
OpenMessaging Benchmark files, instead of -c (docs/omb.md):
  --omb <path>...     OMB workload files, each a point of the campaign
  --driver <path>...  OMB driver files: each workload runs with each driver
  --set <k=v>...      workload keys set at every point"""


def campaign(
    ctx: typer.Context,
    env: str = typer.Argument(..., help="Environment name: run/environments/ENV.yaml.", show_default=False),
    campaign_file: Path = typer.Option(None, "--campaign", "-c", help="Campaign YAML file.", show_default=False),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the points and the estimated time; run nothing."),
    resume: Path = typer.Option(None, "--resume", help="A campaign folder: run its unfinished points."),
    results: Path = typer.Option(None, "--results", help="Folder for campaign folders (default: results/campaigns/)."),
    no_summary: bool = typer.Option(False, "--no-summary", help="Skip the campaign summary and page at the end."),
    workers: int | None = WorkersOpt,
    spark_master_: str = SparkMasterOpt,
    junit: Path = typer.Option(None, "--junit", help="Write each point's thresholds as JUnit XML to this file."),
    json: bool = typer.Option(False, "--json", help="With --dry-run: the points and each one's workload, as JSON."),
) -> None:
    """Run a workload at every point of a campaign's dimensions (each point a full run), or resume one.
    `--omb WORKLOAD... [--driver DRIVER...] [--set k=v...]` runs OpenMessaging Benchmark workload files
    with driver files as OMB's benchmark command does, one point each (docs/omb.md)."""
    from dimster.campaign.checks import check_points
    from dimster.campaign.model import load_campaign
    from dimster.campaign.runner import INTERRUPTED_EXIT, CampaignFolder, run_campaign

    check_environment_name(env)
    folder = CampaignFolder.open(resume) if resume else None
    root = (results or project_dir() / "results" / "campaigns").resolve()
    if ctx.args:
        _check_extra_options(ctx)
        if campaign_file is not None or folder is not None:
            raise DimsterError("--omb makes its own campaign: not with -c or --resume")
        campaign_file = omb_campaign_file(ctx.args, root)
    if campaign_file is not None:
        source = campaign_file
    elif folder is not None:
        source = _recorded_file(folder)
    else:
        raise DimsterError("dimster campaign needs a campaign file: -c CAMPAIGN.yaml (or --resume FOLDER)")
    loaded = load_campaign(source)
    for note in dict.fromkeys(loaded.notes):
        progress(f"note: {note}")
    if folder:
        folder.check_matches(loaded, env)
        workers = folder.resumed_workers(workers)
    profile = with_worker_count(load_environment(env), workers)
    check_points(loaded, profile)
    if dry_run and json:
        from dimster.cli.validate import campaign_document
        from dimster.results.redaction import redact

        return print_json(redact(campaign_document(loaded)))
    if dry_run:
        return _list_points(loaded, folder)
    if folder is None:
        folder = CampaignFolder.create(root, loaded, env, workers)
    master = None if no_summary else spark_master(spark_master_)
    say = lambda line: console.print(line, markup=False)  # noqa: E731
    outcome = run_campaign(loaded, folder, profile, say=say, progress=progress)
    summary = None
    if master and outcome.exit_code != INTERRUPTED_EXIT and any(r["bundle"] for r in folder.state["points"]):
        summary = _summarize(folder.path, master)
    console.print(f"campaign {outcome.folder}: {_counts(folder.state['points'])}", markup=False)
    if loaded.file.omb is not None and (copied := copy_omb_results(folder.path, folder.state["points"])):
        console.print(f"{copied} omb-result file(s) in {folder.path / 'campaign' / 'omb'}", markup=False)
    thresholds = folder.state.get("thresholds") or []
    if junit is not None:
        from dimster.results.junit import campaign_suites, write_junit

        verdict = (summary or {}).get("verdict") or campaign_not_judged(folder.state, thresholds)
        write_junit(campaign_suites(verdict, loaded.file.name), junit)
        console.print(f"junit: {junit}", markup=False)
    if thresholds and not outcome.exit_code and master:
        check_campaign_verdict(folder.path, summary)
    raise typer.Exit(outcome.exit_code)


def _recorded_file(folder: CampaignFolder) -> Path:
    return Path(folder.state["campaign_file"])


def _list_points(loaded: Campaign, folder: CampaignFolder | None) -> None:
    from dimster.campaign.environments import shown
    from dimster.campaign.model import estimated_seconds

    total = 0.0
    environment = None
    for number, point in enumerate(loaded.points, start=1):
        if point.environment and point.environment != environment:
            environment = point.environment
            console.print(f"   on {shown(environment)} (brought up with fresh data):", markup=False)
        state = folder.record(point)["status"] if folder else "pending"
        seconds = estimated_seconds(point.workload)
        if state not in ("completed", "forced", "failed"):
            total += seconds
        console.print(
            f"{number:3}. {point.tag:<18} {point.label or 'the base workload':<60} ~{_duration(seconds):>8}  {state}",
            markup=False,
        )
    mode = loaded.points[0].workload.mode.type if loaded.points else "steady"
    environments = len({repr(p.environment) for p in loaded.points if p.environment})
    on = f" on {environments} environment(s), each started once" if environments else ""
    console.print(
        f"{len(loaded.points)} run(s) of '{loaded.file.name}' in mode {mode}{on}; "
        f"estimated {_duration(total)} for those not finished (cluster start-up and redeploys not counted)",
        markup=False,
    )


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{rest:02d}s"


def _summarize(folder: Path, master: str) -> dict | None:
    """The campaign's summary and page; a failed summary is a warning (the points' bundles stand), and
    the page is still written from campaign.json."""
    try:
        return summarize_campaign_folder(folder, master)
    except DimsterError as e:
        err_console.print(f"dimster: warning: no campaign summary: {e}", markup=False)
        write_campaign_page_line(folder)
        return None


def _counts(records: list[dict]) -> str:
    counts: dict[str, int] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return ", ".join(f"{n} {status}" for status, n in counts.items())


def _check_extra_options(ctx: typer.Context) -> None:
    """An option the command does not have is one line naming it and the closest it has, before the
    extra arguments are read as OMB files (`--dryrun` is not an OMB campaign)."""
    for arg in ctx.args:
        if arg.startswith("-") and arg not in OMB_OPTIONS:
            known = [*(name for param in ctx.command.params for name in param.opts), *OMB_OPTIONS]
            raise DimsterError(f"dimster campaign has no option {arg}{closest(arg, known)} (see `dimster campaign -h`)")


def omb_campaign_file(args: list[str], root: Path) -> Path:
    """`--omb W... [--driver D...] [--set k=v...]` as a campaign file (campaign/omb_files.py)."""
    lists: dict[str, list[str]] = {"--omb": [], "--driver": [], "--set": []}
    current = None
    for arg in args:
        if arg.startswith("-"):
            if arg not in lists:
                raise DimsterError(f"unexpected option {arg}: campaign takes --omb W... [--driver D...] [--set k=v...]")
            current = lists[arg]
        elif current is None:
            raise DimsterError(f"unexpected argument {arg}")
        else:
            current.append(arg)
    if not lists["--omb"]:
        raise DimsterError("--omb needs one or more OpenMessaging Benchmark workload files")
    return write_omb_campaign(lists["--omb"], lists["--driver"], lists["--set"], root)
