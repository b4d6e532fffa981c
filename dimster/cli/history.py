"""`dimster history [RESULTS_DIR]`: past runs and campaigns, one row each, newest last."""

import textwrap
from datetime import datetime
from pathlib import Path

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from dimster.cli.output import OutputConsole, console, err_console, print_json
from dimster.errors import DimsterError
from dimster.paths import display, project_dir
from dimster.results.bundle import is_run_folder
from dimster.results.history import KEY_FIGURES, History, read_history
from dimster.verdict.figures import FIGURES, MSG_RATE, NUMBER

SHOWN_VERDICTS = {"passed": "passed", "failed": "FAILED", "none": "—"}  # "not summarized" as it is
SHOWN_SKIPPED = 3  # folders named in the note; the rest counted


def history(
    results_dir: Path = typer.Argument(
        None, help="A folder of run bundles (default: results/ of the project).", show_default=False
    ),
    workload: str = typer.Option(None, "--workload", help="Only this workload's runs (or this campaign's)."),
    limit: int = typer.Option(20, "--limit", min=0, help="Show the newest N rows (0: all)."),
    json_: bool = typer.Option(False, "--json", help="The rows as JSON, with figure names as keys."),
) -> None:
    """List past runs and campaigns, newest last: time, environment, Kafka version, key figures, verdict."""
    root = results_dir or project_dir() / "results"
    if results_dir is None and not root.exists():
        return _nothing(f"no runs yet: {display(root)} does not exist (dimster run writes its bundles there)", json_)
    if not root.exists():
        raise DimsterError(f"{results_dir} does not exist: name the folder that holds run bundles (default results/)")
    if not root.is_dir():
        raise DimsterError(f"{results_dir} is a file: name the folder that holds run bundles (default results/)")
    if is_run_folder(root):
        raise DimsterError(f"{results_dir} is a run's folder: name the folder that holds runs ({display(root.parent)})")
    found = read_history(root, workload, limit)
    if json_:
        print_json(found.rows)
    elif found.rows:
        table = _table(found, display(root))
        # piped or captured, the table keeps its natural width: a trend is read across whole rows
        natural = console.measure(table, options=console.options.update_width(1000)).maximum
        out = console if console.is_terminal else OutputConsole(highlight=False, width=max(console.width, natural))
        out.print(table)
    elif workload is not None and found.workloads:
        console.print(f"no runs of '{workload}' in {display(root)} (there: {', '.join(found.workloads)})", markup=False)
    else:
        console.print(f"no runs or campaigns in {display(root)}", markup=False)
    if found.skipped:
        named = "; ".join(found.skipped[:SHOWN_SKIPPED]) + ("; ..." if len(found.skipped) > SHOWN_SKIPPED else "")
        err_console.print(f"note: skipped {len(found.skipped)} folder(s) that could not be read: {named}", markup=False)


def _nothing(line: str, json_: bool) -> None:
    if json_:
        print_json([])
    else:
        console.print(line, markup=False)


def _table(found: History, where: str) -> Table:
    shown = f"the newest {len(found.rows)} of {found.matched}" if len(found.rows) < found.matched else "all"
    table = Table(title=Text(f"{where}: {shown} runs and campaigns, newest last"), box=box.SIMPLE_HEAD)
    for column in ("run", "workload", "started", "environment", "Kafka", "status"):
        table.add_column(column)
    for name in KEY_FIGURES:
        unit = FIGURES[name].unit
        table.add_column(f"{name}\n{unit}", justify="right")
    table.add_column("verdict")
    for row in found.rows:
        verdict = SHOWN_VERDICTS.get(row["verdict"], row["verdict"])
        if row["aborted_by"]:
            verdict += ", stopped early"
        if row["failure"]:
            verdict += f" ({textwrap.shorten(str(row['failure']), 100, placeholder='…')})"
        started = row["started"] and datetime.fromisoformat(row["started"]).astimezone().strftime("%Y-%m-%d %H:%M")
        cells = [row["id"], row["workload"], started, row["environment"], row["kafka"], row["status"]]
        figures = [_shown(name, row[name]) for name in KEY_FIGURES]
        table.add_row(*("—" if c is None else str(c) for c in cells), *figures, verdict)
    return table


def _shown(name: str, value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if FIGURES[name].dim in (MSG_RATE, NUMBER) else f"{value:,.1f}"
