"""`dimster validate`: a workload file (dimster's or OpenMessaging Benchmark's, with --set overrides),
a campaign file or an environment profile, checked without running anything; `--json` prints what
it resolved to (secrets masked)."""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dimster.cli.output import console, err_console, print_json
from dimster.cli.run import DriverOpt, SetOpt, set_items
from dimster.errors import DimsterError
from dimster.paths import check_environment_name, display
from dimster.results.redaction import redact
from dimster.yamlfile import load_mapping

if TYPE_CHECKING:
    from dimster.campaign.model import Campaign

CAMPAIGN_KEYS = frozenset({"base", "dimensions", "omb"})  # a campaign file has one of these, a workload none
Say = Callable[..., None]


def validate(
    ctx: typer.Context,
    workload: Path = typer.Argument(..., help="Workload, campaign or environment YAML file.", show_default=False),
    set_: list[str] = SetOpt,
    driver: Path = DriverOpt,
    env: str = typer.Option(
        None, "--env", "-e", help="Also check it against ENV: its Kafka version, broker config and brokers."
    ),
    json: bool = typer.Option(False, "--json", help="Print what the file resolved to as JSON (secrets masked)."),
) -> None:
    """Check a workload file (dimster's or OpenMessaging Benchmark's, and --set overrides), a campaign
    file (every point's workload) or an environment profile without running it; with --env, also what
    a run on that environment would refuse (nothing is started or applied)."""
    say = (err_console if json else console).print  # with --json, stdout holds the JSON alone
    data = _other_file(workload) if driver is None else None
    profile = data is not None and not CAMPAIGN_KEYS & set(data)  # else a campaign file
    if data is None:
        resolved = _workload(ctx, workload, set_, driver, env, say)
    elif set_ or ctx.args or (env and profile):
        what = "an environment profile" if profile else "a campaign file"
        raise DimsterError(
            f"{display(workload)} is {what}: --set is for a workload, --env for a workload or a campaign"
        )
    elif profile:
        resolved = _environment(data, workload, say)
    else:
        resolved = _campaign(data, workload, env, say)
    if json:
        print_json(redact(resolved))


def _other_file(path: Path) -> dict | None:
    """A campaign file's or an environment profile's mapping, by its top-level keys; None for a workload
    (whose own loader reads OMB files, JSON and a missing file's error line)."""
    if not path.is_file() or path.suffix.lower() == ".json":
        return None
    data = load_mapping(path, "workload")
    return data if CAMPAIGN_KEYS & set(data) or "backend" in data else None


def _workload(ctx: typer.Context, path: Path, set_: list[str], driver: Path | None, env: str | None, say: Say) -> dict:
    from dimster.clients.properties import check_client_configs
    from dimster.environment import DEFAULT_KAFKA_VERSION, load_environment
    from dimster.workload.model import load_workload

    notes: list[str] = []
    loaded = load_workload(path, set_items(ctx, set_), driver, notes=notes)
    on = ""
    if env is None:
        from dimster.coordinator.loop.one_run import check_workload_configs

        check_client_configs(loaded, display(path), DEFAULT_KAFKA_VERSION)
        check_workload_configs(loaded, display(path), DEFAULT_KAFKA_VERSION)
    else:
        from dimster.coordinator.loop.one_run import check_on_environment

        check_environment_name(env)
        profile = load_environment(env)
        check_on_environment(loaded, profile, display(path))
        on = f" on '{env}' ({profile.backend}, Kafka {profile.kafka_version})"
    for note in notes:
        say(f"note: {note}", markup=False)
    say(
        f"{path}: ok{on}: '{loaded.name}', {loaded.topics} topic(s) x {loaded.partitions_per_topic} partition(s), "
        f"{loaded.total_producers} producer(s) at {loaded.producer_rate:g} msg/s, "
        f"{loaded.total_consumers} {loaded.consumer_type.lower().replace('_', ' ')} consumer(s)",
        markup=False,
    )
    return loaded.to_yaml_dict()


def _campaign(data: dict, path: Path, env: str | None, say: Say) -> dict:
    from dimster.campaign.model import parse_campaign
    from dimster.clients.properties import check_client_configs
    from dimster.environment import DEFAULT_KAFKA_VERSION, load_environment

    loaded = parse_campaign(data, display(path), path.resolve())
    for note in dict.fromkeys(loaded.notes):
        say(f"note: {note}", markup=False)
    on = ""
    if env is None:
        from dimster.coordinator.loop.one_run import check_workload_configs

        for point in loaded.points:
            check_client_configs(point.workload, f"{display(path)} {point.tag}", DEFAULT_KAFKA_VERSION)
            check_workload_configs(point.workload, f"{display(path)} {point.tag}", DEFAULT_KAFKA_VERSION)
    else:
        from dimster.campaign.checks import check_points

        check_environment_name(env)
        profile = load_environment(env)
        check_points(loaded, profile)
        on = f" on '{env}' ({profile.backend}, Kafka {profile.kafka_version})"
    say(f"{path}: ok{on}: campaign '{loaded.file.name}', {len(loaded.points)} run(s)", markup=False)
    return campaign_document(loaded)


def campaign_document(loaded: "Campaign") -> dict:
    """A campaign's points with the workload each runs, resolved (`validate --json`, `campaign --dry-run --json`)."""
    points = [
        {
            "point": p.index, "repeat": p.repeat, "label": p.label, "values": p.values,
            "environment": p.environment, "workload": p.workload.to_yaml_dict(),
        }
        for p in loaded.points
    ]  # fmt: skip
    return {"campaign": loaded.file.name, "points": points}


def _environment(data: dict, path: Path, say: Say) -> dict:
    from dimster.environment import environment_from

    profile = environment_from(data, path.stem, display(path))
    nodes = getattr(profile, "nodes", None)
    shape = f", {nodes} node(s)" if nodes else ""
    say(
        f"{path}: ok: environment '{profile.name}', backend {profile.backend}{shape}, Kafka {profile.kafka_version}",
        markup=False,
    )
    return profile.model_dump(mode="json", by_alias=True, exclude_none=True)
