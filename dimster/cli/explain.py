"""`dimster explain RUN_DIR`: the run's diagnoses of what limited its share groups (the `limit` and
`limit_cleared` events coordinator/limit_watch.py wrote), in order, from the start of load."""

from pathlib import Path

import typer

from dimster.cli.output import console, print_json
from dimster.errors import DimsterError
from dimster.results.bundle import is_run_folder, load_timeline

KINDS = ("limit", "limit_cleared")


def diagnoses(run_dir: Path) -> list[dict]:
    """The run's diagnoses, each with `atSeconds` from the start of load (None when unknown)."""
    events = load_timeline(run_dir)["events"]
    started = next((e["time"] for e in events if e.get("event") == "load_started" and "time" in e), None)
    return [
        {**e, "atSeconds": round(e["time"] - started, 1) if started is not None and "time" in e else None}
        for e in events
        if e.get("event") in KINDS
    ]


def line(d: dict) -> str:
    at = f"+{d['atSeconds']:.0f} s" if d.get("atSeconds") is not None else "?"
    if d["event"] == "limit_cleared":
        return f"{at:>8}  none: consumption keeps up"
    if d.get("limitRate") is not None:
        levers = f"; levers: {', '.join(d['levers'])}" if d.get("levers") else ""
        return f"{at:>8}  {d['sentence']} (measured {d['measured']:,.0f}){levers}"
    allowed = ", ".join(f"{name} allows {rate:,.0f}" for name, rate in (d.get("allowed") or {}).items())
    shortfall = f"{d['measured']:,.0f} msg/s of {d['offered']:,.0f} offered"
    return f"{at:>8}  unexplained: {shortfall} ({allowed or 'no limit computed'})"


def explain(
    run_dir: Path = typer.Argument(..., help="A run's results folder.", show_default=False),
    json_: bool = typer.Option(False, "--json", help="The diagnoses as JSON."),
) -> None:
    """Say what limited the run's share groups while they fell behind: the binding limit, its formula
    and the rate it predicts against the rate measured, and the levers; or that a shortfall was
    unexplained."""
    if not run_dir.is_dir() or not is_run_folder(run_dir):
        raise DimsterError(f"{run_dir} is not a run's results folder (one with run.json): name a run's folder")
    found = diagnoses(run_dir)
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
