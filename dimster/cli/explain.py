"""`dimster explain RUN_DIR`: the run's diagnoses of what limited its share groups (the `limit` and
`limit_cleared` events coordinator/loop/limit_watch.py wrote), in order, from the start of load."""

from pathlib import Path

import typer

from dimster.cli.output import console, print_json
from dimster.diagnosis.timeline import diagnoses, line
from dimster.errors import DimsterError
from dimster.results.bundle import is_run_folder, load_timeline


def explain(
    run_dir: Path = typer.Argument(..., help="A run's results folder.", show_default=False),
    json_: bool = typer.Option(False, "--json", help="The diagnoses as JSON."),
) -> None:
    """Say what limited the run's share groups while they fell behind: the binding limit, its formula
    and the rate it predicts against the rate measured, and the levers; or that a shortfall was
    unexplained."""
    if not run_dir.is_dir() or not is_run_folder(run_dir):
        raise DimsterError(f"{run_dir} is not a run's results folder (one with run.json): name a run's folder")
    found = diagnoses(load_timeline(run_dir)["events"])
    if json_:
        print_json({"run": run_dir.name, "diagnoses": found})
        return
    if not found:
        console.print(f"{run_dir.name}: no share group fell behind for two windows: nothing to explain", markup=False)
        return
    console.print(
        f"{run_dir.name}: {sum(d['event'] == 'limit' for d in found)} diagnosis(es), from the start of load",
        markup=False,
    )
    for d in found:
        console.print(line(d), markup=False)
