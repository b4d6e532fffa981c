"""`dimster k8s render ENV (-w WORKLOAD | -c CAMPAIGN) -o DIR`: the manifests of kubernetes/deployment.py
(and, for a `strimzi` profile, its brokers' resources) as files a user applies with `kubectl apply -k
DIR` (docs/kubernetes.md). What a run or campaign on ENV would refuse is refused here, before anything
is written."""

from pathlib import Path
from typing import Any

import typer
import yaml

from dimster import yamlcore
from dimster.cli.output import console
from dimster.environment import EnvironmentProfile, load_environment
from dimster.errors import DimsterError
from dimster.kubernetes.deployment import (
    JobInput,
    KubernetesDeploy,
    agents,
    coordinator,
    coordinator_role,
    image_of,
    namespace_of,
)
from dimster.kubernetes.strimzi import StrimziProfile, broker_properties, resources
from dimster.paths import check_environment_name, display
from dimster.secret_keys import is_secret_key
from dimster.yamlfile import load_mapping

BACKENDS = ("strimzi", "external")  # the coordinator pod reaches brokers it does not run itself


def _documents(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False)


def _secret_keys(value: Any, prefix: str = "") -> list[str]:
    """The dotted keys of `value` that hold a secret (sasl.password ...), or dimensions that vary one."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}{key}"
            if is_secret_key(key) or (key in ("key", "keys") and any(map(is_secret_key, _names(item)))):
                found.append(path if not key.startswith("key") else f"{prefix}{', '.join(_names(item))}")
            else:
                found += _secret_keys(item, f"{path}.")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _secret_keys(item, f"{prefix}{index}.")
    return found


def _names(item: Any) -> list[str]:
    return [item] if isinstance(item, str) else [str(name) for name in item] if isinstance(item, list) else []


def job_input(profile: EnvironmentProfile, workload: Path | None, campaign: Path | None) -> tuple[JobInput, str]:
    """What the coordinator Job runs, checked against `profile` as a run or campaign on it would be, as
    one file that needs no other (a payload.file's data and a campaign's base taken in); and its name."""
    from dimster.campaign.checks import check_points
    from dimster.campaign.model import load_campaign
    from dimster.coordinator.loop.one_run import check_on_environment
    from dimster.workload.model import load_workload
    from dimster.workload.payload import with_file_data

    if (workload is None) == (campaign is None):
        raise DimsterError("dimster k8s render needs one of -w WORKLOAD.yaml and -c CAMPAIGN.yaml")
    if workload is not None:
        loaded = load_workload(workload)
        check_on_environment(loaded, profile, display(workload))
        raw = load_mapping(workload, "workload")
        document = with_file_data(raw, [workload.parent, Path.cwd()], display(workload))
        _no_secret(document, display(workload))
        text = workload.read_text() if document is raw else yamlcore.dump(document)
        return JobInput("workload", text), f"workload '{loaded.name}'"
    assert campaign is not None
    run = load_campaign(campaign)
    if run.file.omb is not None:
        raise DimsterError(
            f"{display(campaign)}: an omb campaign reads its workload and driver files where they are; "
            "`dimster omb import` each and render a campaign of their workloads"
        )
    check_points(run, profile)
    # the base as the campaign resolved it: its file read, the campaign's mode and thresholds in it
    document = {**run.file.model_dump(by_alias=True, exclude_none=True, exclude={"base", "mode", "thresholds"}),
                "base": run.base}  # fmt: skip
    _no_secret(document, display(campaign))
    return JobInput("campaign", yamlcore.dump(document)), f"campaign '{run.file.name}'"


def _no_secret(document: dict, source: str) -> None:
    if keys := _secret_keys(document):
        raise DimsterError(
            f"{source}: {keys[0]} holds a secret, which a ConfigMap would keep in plain text on disk and in "
            "the cluster: give the brokers' password through the profile's security (passwordEnv) instead"
        )


def render_files(env: str, workload: Path | None, campaign: Path | None, out: Path) -> list[str]:
    """Write the files; return the lines that tell the user what they are and what to run next."""
    check_environment_name(env)
    profile = load_environment(env)
    if profile.backend not in BACKENDS:
        raise DimsterError(
            f"run/environments/{env}.yaml: backend '{profile.backend}' runs its brokers on this host; "
            f"a coordinator in Kubernetes needs backend {' or '.join(BACKENDS)}"
        )
    job, what = job_input(profile, workload, campaign)  # checked before anything is written
    deploy: KubernetesDeploy = getattr(profile, "kubernetes", None) or KubernetesDeploy()
    config_source = display(profile.broker_config_path)
    files = {
        "agents.yaml": agents(profile, deploy),
        "coordinator.yaml": coordinator(profile, deploy, env, job, profile.broker_config_path.read_text()),
    }
    if isinstance(profile, StrimziProfile):
        files["strimzi.yaml"] = resources(profile, broker_properties(profile), config_source)
        files["coordinator-role.yaml"] = coordinator_role(profile, deploy)
    ns = namespace_of(profile, deploy)
    out.mkdir(parents=True, exist_ok=True)
    for name, objects in files.items():
        (out / name).write_text(_documents(objects))
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": ns,
                     "resources": list(files)}  # fmt: skip
    (out / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    where = display(out)
    bundles = "the campaign's folder" if campaign else "the bundle"
    return [
        f"wrote {', '.join(files)} and kustomization.yaml to {where}: {what} on '{env}' "
        f"({deploy.agents} agent(s) of image {image_of(profile, deploy)}, namespace {ns})",
        f"kubectl -n {ns} create secret generic {deploy.token_secret} --from-file=token=TOKEN_FILE   # once",
        f"kubectl apply -k {where}",
        f"kubectl -n {ns} wait --for=condition=complete job/dimster-run --timeout={'24h' if campaign else '2h'}",
        f"kubectl cp {ns}/dimster-results:/results ./results   # {bundles}; then dimster summarize",
    ]


app = typer.Typer(help="dimster in Kubernetes: agents, the coordinator, Strimzi's brokers.", no_args_is_help=True)


@app.command()
def render(
    env: str = typer.Argument(..., help="An environment of backend strimzi or external (run/environments/ENV.yaml)."),
    workload: Path = typer.Option(None, "-w", "--workload", help="The workload file the coordinator Job runs."),
    campaign: Path = typer.Option(None, "-c", "--campaign", help="Or the campaign file it runs."),
    out: Path = typer.Option(..., "-o", "--out", help="The folder to write the manifests to."),
) -> None:
    """Write the agents, the coordinator Job (a workload or a campaign) and (backend strimzi) the
    brokers' resources, with a kustomization.yaml: `kubectl apply -k OUT`."""
    for line in render_files(env, workload, campaign, out):
        console.print(line, markup=False, highlight=False)
