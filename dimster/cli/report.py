"""`dimster report RUN_DIR` and `dimster compare RUN_DIR...`: self-contained HTML reports of summarized runs."""

import webbrowser
from pathlib import Path

import typer
from rich.table import Table

from dimster.cli.output import console, print_json, progress
from dimster.errors import DimsterError, RegressionFound


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
        ...,
        help="Two or more run results folders (summarized); with --verdict, a baseline and a candidate: "
        "two runs or two campaigns.",
        show_default=False,
    ),
    output: Path = typer.Option(
        None, "--output", "-o", help="The HTML file to write (default: comparison-<UTC time>.html here)."
    ),
    verdict: bool = typer.Option(
        False,
        "--verdict",
        help="Say per figure whether the candidate (second) is better, worse or the same as the baseline "
        "(first), with a significance test; exit 9 on a regression.",
    ),
    tolerances: list[str] = typer.Option(
        [],
        "--tolerance",
        metavar="FIGURE=VALUE",
        help="How far a figure may move the worse way before it counts, as e2e.p99=10% (of the baseline) "
        "or e2e.p99=5ms (default: latencies 10%, rates 5%, counts 0); repeatable. With --verdict.",
        show_default=False,
    ),
    json_: bool = typer.Option(False, "--json", help="With --verdict: print the verdict as JSON."),
    junit: Path = typer.Option(None, "--junit", help="With --verdict: write it as JUnit XML to this file."),
    judge_saturated: bool = typer.Option(
        False,
        "--judge-saturated",
        help="With --verdict: judge latencies and rates of a run whose load generator was saturated in its "
        "measured phase (by default they are undecided).",
    ),
) -> None:
    """Write one HTML page comparing runs side by side: key numbers, settings that differ, overlaid charts.
    With --verdict, first say whether the candidate regressed from the baseline."""
    from dimster.report.compare import default_output, write_comparison

    if not verdict:
        if tolerances or json_ or junit or judge_saturated:
            raise DimsterError("--tolerance, --json, --junit and --judge-saturated go with --verdict")
        path = write_comparison(run_dirs, output or default_output())
        console.print(str(path), markup=False)
        return
    if len(run_dirs) != 2:
        raise DimsterError(f"compare --verdict takes two folders, a baseline and a candidate (got {len(run_dirs)})")
    from dimster.report.verdict_page import write_verdict_page
    from dimster.verdict.compare import compare_verdict, parse_tolerances, regression_line

    result = compare_verdict(run_dirs[0], run_dirs[1], parse_tolerances(tolerances), judge_saturated=judge_saturated)
    out = output or default_output()
    if (run_dirs[0] / "campaign.json").is_file():
        path = write_verdict_page(result, out)
    else:
        path = write_comparison(run_dirs, out, result)
    if json_:
        print_json(result)
        progress(str(path))
    else:
        for point in result["points"]:
            console.print(_verdict_table(point, several=len(result["points"]) > 1))
        for note in result["notes"]:
            console.print(f"note: {note}", markup=False)
        console.print(str(path), markup=False)
    if junit is not None:
        from dimster.results.junit import comparison_suites, write_junit

        write_junit(comparison_suites(result), junit)
        progress(f"junit: {junit}")
    line = regression_line(result)
    if result["regression"]:
        raise RegressionFound(line)
    if not json_:
        console.print(line, markup=False)


def _verdict_table(point: dict, several: bool) -> Table:
    from dimster.verdict.compare import change_text, shown_p

    table = Table(title=point["label"] if several else None, box=None, pad_edge=False, padding=(0, 1))
    for column in ("figure", "unit", "baseline", "candidate", "change", "test", "p", "verdict"):
        left = column in ("figure", "unit", "test", "verdict")
        table.add_column(column, justify="left" if left else "right", no_wrap=column == "figure")
    for f in point["figures"]:
        p = shown_p(f)
        style = {"worse": "bold red", "better": "green", "undecided": "yellow"}.get(f["verdict"], "")
        table.add_row(
            f["figure"],
            f["unit"],
            _number(f["baseline"]),
            _number(f["candidate"]),
            change_text(f),
            f["test"],
            "-" if p is None else "<0.001" if p < 0.001 else f"{p:.2g}",
            f"[{style}]{f['verdict']}[/]" if style else f["verdict"],
        )
    return table


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:,.4g}"


def _open(path: Path) -> None:
    if not webbrowser.open(path.resolve().as_uri()):
        progress(f"no web browser found; open {path} yourself")
