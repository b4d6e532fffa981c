"""`dimster k8s render ENV -w WORKLOAD -o DIR`: the manifests of kubernetes/deployment.py (and, for a
`strimzi` profile, its brokers' resources) as files a user applies with `kubectl apply -k DIR`
(docs/kubernetes.md)."""

from pathlib import Path
from typing import Any

import typer
import yaml

from dimster.cli.output import console
from dimster.environment import load_environment
from dimster.errors import DimsterError
from dimster.kubernetes.deployment import (
    KubernetesDeploy,
    agents,
    coordinator,
    coordinator_role,
    image_of,
    namespace_of,
)
from dimster.kubernetes.strimzi import StrimziProfile, broker_properties, resources
from dimster.paths import display
from dimster.workload.model import load_workload

BACKENDS = ("strimzi", "external")  # the coordinator pod reaches brokers it does not run itself


def _documents(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False)


def render_files(env: str, workload_path: Path, out: Path) -> list[str]:
    """Write the files; return the lines that tell the user what they are and what to run next."""
    profile = load_environment(env)
    if profile.backend not in BACKENDS:
        raise DimsterError(
            f"run/environments/{env}.yaml: backend '{profile.backend}' runs its brokers on this host; "
            f"a coordinator in Kubernetes needs backend {' or '.join(BACKENDS)}"
        )
    workload = load_workload(workload_path)  # checked before anything is written
    deploy: KubernetesDeploy = getattr(profile, "kubernetes", None) or KubernetesDeploy()
    config_source = display(profile.broker_config_path)
    files = {
        "agents.yaml": agents(profile, deploy),
        "coordinator.yaml": coordinator(
            profile, deploy, env, workload_path.read_text(), profile.broker_config_path.read_text()
        ),
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
    return [
        f"wrote {', '.join(files)} and kustomization.yaml to {where}: workload '{workload.name}' on '{env}' "
        f"({deploy.agents} agent(s) of image {image_of(profile, deploy)}, namespace {ns})",
        f"kubectl -n {ns} create secret generic {deploy.token_secret} --from-file=token=TOKEN_FILE   # once",
        f"kubectl apply -k {where}",
        f"kubectl -n {ns} wait --for=condition=complete job/dimster-run --timeout=2h",
        f"kubectl cp {ns}/dimster-results:/results ./results   # the bundle; then dimster summarize",
    ]


app = typer.Typer(help="dimster in Kubernetes: agents, the coordinator, Strimzi's brokers.", no_args_is_help=True)


@app.command()
def render(
    env: str = typer.Argument(..., help="An environment of backend strimzi or external (run/environments/ENV.yaml)."),
    workload: Path = typer.Option(..., "-w", "--workload", help="The workload file the coordinator Job runs."),
    out: Path = typer.Option(..., "-o", "--out", help="The folder to write the manifests to."),
) -> None:
    """Write the agents, the coordinator Job and (backend strimzi) the brokers' resources, with a
    kustomization.yaml: `kubectl apply -k OUT`."""
    for line in render_files(env, workload, out):
        console.print(line, markup=False, highlight=False)
