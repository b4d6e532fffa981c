"""`dimster validate` and `dimster run`: workloads from YAML."""

from pathlib import Path

import typer

from dimster.cli.output import console, progress
from dimster.cluster.backend import backend_for
from dimster.coordinator.run import Coordinator
from dimster.environment import load_environment
from dimster.errors import DimsterError
from dimster.paths import display, project_dir
from dimster.results.bundle import ResultsBundle
from dimster.workload.client_config import check_client_configs
from dimster.workload.model import load_workload
from dimster.workload.overrides import parse_set_arguments

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


EXTRA_ARGS = {"allow_extra_args": True, "ignore_unknown_options": True}


def validate(
    ctx: typer.Context,
    workload: Path = typer.Argument(..., help="Workload YAML file.", show_default=False),
    set_: list[str] = SetOpt,
) -> None:
    """Check a workload file (and --set overrides) without running it."""
    loaded = load_workload(workload, set_items(ctx, set_))
    check_client_configs(loaded, display(workload))
    console.print(
        f"{workload}: ok: '{loaded.name}', {loaded.topics} topic(s) x {loaded.partitions_per_topic} partition(s), "
        f"{loaded.total_producers} producer(s) at {loaded.producer_rate:g} msg/s, "
        f"{loaded.total_consumers} {loaded.consumer_type.lower().replace('_', ' ')} consumer(s)"
    )


def run(
    ctx: typer.Context,
    env: str = typer.Argument(..., help="Environment name: run/environments/ENV.yaml.", show_default=False),
    workload: Path = typer.Option(None, "--workload", "-w", help="Workload YAML file.", show_default=False),
    set_: list[str] = SetOpt,
    results: Path = typer.Option(None, "--results", help="Folder for results bundles (default: results/)."),
) -> None:
    """Run a workload against the cluster of ENV (brought up, or reused if it runs)."""
    sets = set_items(ctx, set_)
    if workload is None:
        raise DimsterError("dimster run needs a workload: -w WORKLOAD.yaml")
    loaded = load_workload(workload, sets)
    check_client_configs(loaded, display(workload))
    profile = load_environment(env)
    if loaded.broker_config:
        overrides = {**profile.broker_overrides, **loaded.broker_config}
        profile = profile.model_copy(update={"broker_overrides": overrides})
    cluster = backend_for(profile)
    if cluster.status().healthy:
        cluster.redeploy(progress)  # brings a running cluster to this run's broker config, if it differs
    else:
        cluster.up(progress)
    bundle = ResultsBundle(results or project_dir() / "results", loaded.name)
    bundle.start(
        workload=loaded.to_yaml_dict(),
        environment=profile.model_dump(by_alias=True),
        broker_config=cluster.broker_config(),
        kafka_version=cluster.status().kafka_version,
        run_id=bundle.path.name,
    )
    say = lambda line: console.print(line, markup=False)  # noqa: E731
    coordinator = Coordinator(loaded, cluster, bundle, profile.workers, say=say)
    try:
        code = coordinator.run()
    finally:
        bundle.copy_broker_logs(cluster.log_files())
    raise typer.Exit(code)
