"""`dimster k8s render`: what a user applies to run a workload in Kubernetes (docs/kubernetes.md)."""

from pathlib import Path

import typer

from dimster.cli.output import console

app = typer.Typer(help="dimster in Kubernetes: agents, the coordinator, Strimzi's brokers.", no_args_is_help=True)


@app.command()
def render(
    env: str = typer.Argument(..., help="An environment of backend strimzi or external (run/environments/ENV.yaml)."),
    workload: Path = typer.Option(..., "-w", "--workload", help="The workload file the coordinator Job runs."),
    out: Path = typer.Option(..., "-o", "--out", help="The folder to write the manifests to."),
) -> None:
    """Write the agents, the coordinator Job and (backend strimzi) the brokers' resources, with a
    kustomization.yaml: `kubectl apply -k OUT`."""
    from dimster.kubernetes.render import render as render_files

    for line in render_files(env, workload, out):
        console.print(line, markup=False, highlight=False)
