"""`dimster tune ENV -w WORKLOAD --goal EXPR --lever KEY[=RANGE][@COST] --dry-run`: the tuner's plan from
the share-group model alone (tuning/plan.py), step by step: the limit that binds, the lever pulled,
the rate predicted before and after, and why."""

from pathlib import Path

import typer

from dimster.cli.output import console, print_json
from dimster.cli.run import SetOpt, set_items

UNREACHABLE = 10  # the goals cannot be met within the allowed ranges (docs/cli.md)


def tune(
    ctx: typer.Context,
    env: str = typer.Argument(..., help="Environment name: run/environments/ENV.yaml.", show_default=False),
    workload: Path = typer.Option(..., "--workload", "-w", help="Workload YAML file.", show_default=False),
    goal: list[str] = typer.Option(
        ..., "--goal", help="A goal in the thresholds' grammar, as 'consumed.rate >= 20000msg/s'."
    ),
    lever: list[str] = typer.Option(
        None,
        "--lever",
        help="KEY[=LOW..HIGH or =A,B][@COST]: a lever the tuner may pull (default: every one it knows).",
    ),
    set_: list[str] = SetOpt,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan from the model alone; start nothing."),
    json_: bool = typer.Option(False, "--json", help="The plan as JSON."),
    budget: float = typer.Option(1800, "--budget", help="Seconds of load the tuning run may take at most."),
    no_summary: bool = typer.Option(False, "--no-summary", help="Skip the tuning run's Spark summary."),
    settle: float = typer.Option(10, "--settle", help="Seconds a change settles, then as long its rate is measured."),
    allow_redeploy: bool = typer.Option(
        False,
        "--allow-redeploy",
        help="Allow changes that take a broker redeploy (a lock budget above the brokers' ceiling).",
    ),
    results: Path = typer.Option(None, "--results", help="Folder for the tuning run's bundle (default: results/)."),
) -> None:
    """Plan the lever changes that make a share-group workload meet its goals, cheapest first, from
    the model of what limits a share group; exit 0 when the plan meets them, 10 when it cannot."""
    from dimster.coordinator.loop.one_run import with_workload_broker_config
    from dimster.environment import load_environment
    from dimster.errors import DimsterError
    from dimster.kafka.broker_config import load_broker_config
    from dimster.tuning.levers import KNOWN, parse_lever
    from dimster.tuning.plan import lever_values, parse_goals, plan
    from dimster.tuning.tuned_file import brokers_known
    from dimster.workload.model import load_workload

    sets = set_items(ctx, set_)
    w = load_workload(workload, sets)
    profile = with_workload_broker_config(w, load_environment(env))  # as the run's brokers would have it
    goals = parse_goals(goal)
    broker_file, overrides = brokers_known(profile)  # none of an external cluster's
    broker = {} if broker_file is None else {**load_broker_config(broker_file), **overrides}
    if allow_redeploy and broker_file is None:
        raise DimsterError(f"--allow-redeploy: '{env}' is an external cluster, whose brokers dimster does not redeploy")
    now = lever_values(w, broker)
    levers = [parse_lever(text, now, broker, allow_redeploy) for text in lever or KNOWN]
    if not dry_run:
        from dimster.cli.tune_run import tune_run
        from dimster.paths import project_dir

        folder = results or project_dir() / "results"
        tuned = tune_run(profile, workload, w, sets, goals, levers, now, budget, no_summary, settle, folder, json_)
        if not tuned.met:
            raise typer.Exit(UNREACHABLE)
        return
    result = plan(w, goals, levers, broker)
    if json_:
        print_json({
            "workload": w.name, "goals": result.goals, "offered": result.offered,
            "predictedStart": round(result.predicted_start, 1), "met": result.met, "reason": result.reason,
            "limit": result.limit, "changes": result.changes, "notes": result.notes,
            "steps": [{"limit": s.limit, "lever": s.lever, "before": s.before, "after": s.after,
                       "predictedBefore": round(s.predicted_before, 1), "predicted": round(s.predicted, 1),
                       "cost": s.cost, "why": s.why, "redeploy": s.redeploy} for s in result.steps],
        })  # fmt: skip
    else:
        say = lambda line: console.print(line, markup=False)  # noqa: E731
        say(f"{w.name}: {result.offered:,.0f} msg/s offered; predicted {result.predicted_start:,.0f} msg/s consumed")
        say(f"  limit: {result.limit if not result.steps else result.steps[0].limit}")
        for n, step in enumerate(result.steps, 1):
            say(f"step {n}: {step.lever} {step.before} -> {step.after} (cost {step.cost:g}): {step.why}")
        if result.changes:
            say("plan: " + " ".join(f"--set {k}={v}" for k, v in result.changes.items()))
        say(f"{'met' if result.met else 'not met'}: {result.reason}; binding now: {result.limit}")
        for note in result.notes:
            say(f"note: {note}")
    if not result.met:
        raise typer.Exit(UNREACHABLE)
