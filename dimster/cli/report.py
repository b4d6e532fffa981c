"""`dimster report RUN_DIR` and `dimster compare RUN_DIR...`: self-contained HTML reports of summarized runs."""

import webbrowser
from pathlib import Path

import typer

from dimster.cli.output import console, progress


def report(
    run_dir: Path = typer.Argument(..., help="A run's results folder (summarized).", show_default=False),
    open_: bool = typer.Option(False, "--open", help="Open the report in the web browser."),
) -> None:
    """Write RUN_DIR/report.html: key numbers, charts over the run with its live changes, tables, inputs."""
    from dimster.report.html import write_report  # plotly and pandas load only when a report is made

    path = write_report(run_dir)
    console.print(str(path), markup=False)
    if open_:
        _open(path)


def compare(
    run_dirs: list[Path] = typer.Argument(
        ..., help="Two or more run results folders (summarized).", show_default=False
    ),
    output: Path = typer.Option(
        None, "--output", "-o", help="The HTML file to write (default: comparison-<UTC time>.html here)."
    ),
) -> None:
    """Write one HTML page comparing runs side by side: key numbers, settings that differ, overlaid charts."""
    from dimster.report.compare import default_output, write_comparison

    path = write_comparison(run_dirs, output or default_output())
    console.print(str(path), markup=False)


def _open(path: Path) -> None:
    if not webbrowser.open(path.resolve().as_uri()):
        progress(f"no web browser found; open {path} yourself")
