"""`dimster summarize RUN_DIR`: the Spark summary of a run (also run at the end of every run)."""

import contextlib
import importlib
import threading
from pathlib import Path

import typer

from dimster.cli.output import SparkMasterOpt, console, err_console
from dimster.errors import DimsterError, ThresholdsBreached
from dimster.pipeline.spark import spark_master
from dimster.processes import nice_this_thread
from dimster.verdict.campaign import point_outcome
from dimster.verdict.judge import Spec, breaches, not_judged
from dimster.workload.modes import mode_line


def summarize(
    run_dir: Path = typer.Argument(..., help="A run's results folder.", show_default=False),
    spark_master_: str = SparkMasterOpt,
) -> None:
    """Summarize a run's metrics with Spark into RUN_DIR/summary/ (summary.json, CSV, Parquet); for a
    campaign folder, every run of it into campaign/summary/ and campaign.html."""
    if (run_dir / "campaign.json").is_file():
        check_campaign_verdict(run_dir, summarize_campaign_folder(run_dir, spark_master(spark_master_)))
        return

    from dimster.coordinator.loop.recover import recover_crashed

    for note in recover_crashed(run_dir):  # a run whose coordinator was killed: its end first
        console.print(f"note: {note}", markup=False)
    summary = summarize_with_progress(run_dir, spark_master(spark_master_))
    print_summary(run_dir, summary)
    check_verdict(run_dir, summary)


def summarize_with_progress(run_dir: Path, master: str) -> dict:
    """The run's summary, with a line on a terminal's stderr saying which step it is in (nothing when
    stderr is not a terminal: scripts see only the result). A driver of the summary's own (local[N],
    spark://) writes to its log through this process's stderr while it starts: no line then."""
    from rich.text import Text

    from dimster.pipeline.spark import own_driver
    from dimster.pipeline.summary import summarize as summarize_run

    if own_driver(master):
        return summarize_run(run_dir, master)
    with err_console.status(Text(f"summarizing {run_dir.name}")) as status:
        return summarize_run(run_dir, master, lambda step: status.update(Text(f"summarizing {run_dir.name}: {step}")))


def summarize_campaign_folder(folder: Path, master: str) -> dict:
    """campaign/summary/ by one Spark job over every run of the campaign, then campaign.html."""
    from dimster.pipeline.campaign_summary import summarize_campaign

    summary = summarize_campaign(folder, master)
    console.print(
        f"campaign summary of {len(summary['points'])} point(s) in {folder / 'campaign' / 'summary'}", markup=False
    )
    for point in (summary.get("verdict") or {}).get("points", []):
        for line in verdict_lines(point if point["passed"] is not None else None):
            console.print(f"  point {point['point']} ({point['label']}):{line.removeprefix(' ')}", markup=False)
    write_campaign_page_line(folder)
    return summary


def check_campaign_verdict(folder: Path, summary: dict | None) -> None:
    """Exit 8 when a point's thresholds did not all hold, or the campaign could not be judged."""
    if summary is None:
        raise ThresholdsBreached(f"thresholds not judged: no summary of the campaign in {folder}")
    verdict = summary.get("verdict")
    if verdict and not verdict["passed"]:
        said = {"failed": "breached", "undecided": "undecided", "not judged": "not judged"}
        kinds: dict[str, list[str]] = {word: [] for word in said.values()}
        for point in verdict["points"]:
            if (kind := point_outcome(point)) != "passed":
                kinds[said[kind]].append(str(point["point"]))
        what = "; ".join(f"{kind} at point(s) {', '.join(numbers)}" for kind, numbers in kinds.items() if numbers)
        raise ThresholdsBreached(f"thresholds {what} (in {folder})")


def campaign_not_judged(state: dict, thresholds: list) -> dict | None:
    """A campaign verdict without a summary: every point unjudged."""
    import pandas as pd

    from dimster.verdict.campaign import campaign_verdict

    return campaign_verdict(thresholds, state.get("points") or [], pd.DataFrame({"point": []}))


def write_campaign_page_line(folder: Path) -> None:
    from dimster.report.campaign_page import write_campaign_page

    console.print(f"campaign page: {write_campaign_page(folder)}", markup=False)


def print_summary(run_dir: Path, summary: dict) -> None:
    throughput = summary.get("throughput") or {}
    latency = summary.get("latency_ms") or {}
    lines = [f"summary of {run_dir.name} in {run_dir / 'summary'}"]
    if throughput.get("seconds"):
        lines.append(
            f"  measured {throughput['seconds']} s: produced {throughput['produced_msgs_per_s']:,.0f} msg/s "
            f"({throughput['produced_mb_per_s']:.2f} MB/s), consumed {throughput['consumed_msgs_per_s']:,.0f} msg/s"
        )
    for metric in ("e2e", "publish", "publish_delay"):
        if metric in latency and latency[metric].get("count"):
            m = latency[metric]
            lines.append(
                f"  {metric:13} p50 {m['p50']:.1f} ms  p99 {m['p99']:.1f} ms  p99.9 {m['p99_9']:.1f} ms  "
                f"max {m['max']:.1f} ms"
            )
    if line := mode_line(summary.get("mode") or {}):
        lines.append(f"  {line}")
    lines += verdict_lines(summary.get("verdict"))
    for note in summary.get("notes", []):
        lines.append(f"  note: {note}")
    for line in lines:
        console.print(line, markup=False)


def verdict_lines(verdict: dict | None) -> list[str]:
    """The thresholds' outcome: how many passed, then each that did not, with its value."""
    if not verdict:
        return []
    results = verdict["thresholds"]
    passed = sum(r["passed"] is True for r in results)
    undecided = sum(r["passed"] is None for r in results)
    outcome = ": UNDECIDED" if undecided and passed + undecided == len(results) else ": FAILED"
    told = f", {undecided} undecided" if undecided else ""
    lines = [f"  thresholds: {passed} of {len(results)} passed{told}" + ("" if verdict["passed"] else outcome)]
    if verdict.get("aborted_by"):
        lines.append(f"    stopped early: '{verdict['aborted_by']}' could not pass any more")
    lines += [f"    {'breached' if r['passed'] is False else 'undecided'} {line}" for r, line in _not_passed(verdict)]
    return lines


def _not_passed(verdict: dict) -> list[tuple[dict, str]]:
    """Each threshold that did not pass, with breaches()'s line for it."""
    return list(zip([r for r in verdict["thresholds"] if not r["passed"]], breaches(verdict), strict=True))


def check_verdict(run_dir: Path, summary: dict | None) -> None:
    """Exit 8 when the run's thresholds did not all hold, or could not be judged (no summary)."""
    if summary is None:
        raise ThresholdsBreached(f"thresholds not judged: no summary of {run_dir.name} (results kept in {run_dir})")
    verdict = summary.get("verdict")
    if verdict and not verdict["passed"]:
        failed = sum(r["passed"] is False for r in verdict["thresholds"])
        undecided = sum(r["passed"] is None for r in verdict["thresholds"])
        what = f"breached: {failed}" + (f", undecided: {undecided}" if undecided else "")
        raise ThresholdsBreached(f"thresholds {what} of {len(verdict['thresholds'])} (results kept in {run_dir})")


def write_run_junit(path: Path, run_dir: Path, summary: dict | None, thresholds: list[Spec]) -> None:
    """--junit: the run's thresholds as JUnit XML, one case each (errors when there is no summary)."""
    from dimster.pipeline.summary import read_run_info
    from dimster.results.junit import run_suite, write_junit

    verdict = summary.get("verdict") if summary else not_judged(thresholds, "not judged: the run has no summary")
    write_junit([run_suite(verdict, read_run_info(run_dir / "run.json"))], path)
    console.print(f"junit: {path}", markup=False)


# What a run's end imports to summarize and write its report: some 1.5 s of a fresh process (pandas,
# PySpark's Connect client, plotly and its chart template), taken while the run starts instead.
END_OF_RUN_MODULES = ("dimster.pipeline.summary", "pyspark.sql.connect.session", "dimster.report.html")
_imports_ahead: list[threading.Thread] = []


def import_ahead() -> None:
    """Import what a run's end uses on a thread of its own at nice 10, as the run starts (cli/run.py);
    the run's end waits for it to finish rather than import the same modules beside it."""
    thread = threading.Thread(target=_import_end_of_run, name="end-of-run-imports", daemon=True)
    _imports_ahead.append(thread)
    thread.start()


def _import_end_of_run() -> None:
    nice_this_thread()  # the run's own threads go first
    with contextlib.suppress(Exception):  # an import that fails here fails again, in one line, where it is used
        for name in END_OF_RUN_MODULES:
            importlib.import_module(name)
        importlib.import_module("plotly.io").templates["plotly_white"]  # a template loads on first use


def summarize_after_run(run_dir: Path, master: str) -> dict | None:
    """At the end of a run: summarize, and say so in one line if it cannot (the run's own result
    stands); returns the summary, None when there is none."""
    for thread in _imports_ahead:
        thread.join()
    from dimster.report.html import write_report

    try:
        summary = summarize_with_progress(run_dir, master)
        print_summary(run_dir, summary)
        console.print(f"report: {write_report(run_dir)}", markup=False)
        return summary
    except DimsterError as e:
        err_console.print(f"dimster: warning: no summary for {run_dir.name}: {e}", markup=False)
        return None
