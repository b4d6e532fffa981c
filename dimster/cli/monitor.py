"""`dimster monitor ...`: a Prometheus for an environment's runs and brokers."""

import typer

from dimster.cli.output import console, print_json
from dimster.environment import load_environment
from dimster.monitor import DEFAULT_PORT, Monitor

app = typer.Typer(
    help="Prometheus (Debian's package) on loopback, scraping an environment's runs and brokers.",
    no_args_is_help=True,
)

EnvArg = typer.Argument(..., help="Environment name: a file run/environments/ENV.yaml.", show_default=False)
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")


@app.command()
def up(
    env: str = EnvArg,
    port: int = typer.Option(DEFAULT_PORT, "--port", min=1, max=65535, help="Prometheus' port on 127.0.0.1."),
    json: bool = JsonOpt,
) -> None:
    """Start Prometheus for ENV (a running one is reused) and print its URL. Its configuration and
    data live under the state folder; runs of ENV are found as they start."""
    monitor = Monitor(load_environment(env))
    state = monitor.up(port)
    if json:
        print_json({"environment": env, "url": state.url, "pid": state.pid, "folder": str(monitor.folder)})
    else:
        console.print(f"Prometheus for '{env}': {state.url} (data in {monitor.folder})")


@app.command()
def down(env: str = EnvArg) -> None:
    """Stop ENV's Prometheus (its data is kept)."""
    stopped = Monitor(load_environment(env)).down()
    console.print(f"'{env}': Prometheus stopped" if stopped else f"'{env}': no Prometheus was running")


@app.command()
def status(env: str = EnvArg, json: bool = JsonOpt) -> None:
    """Whether ENV's Prometheus runs, and its URL. Exit code 0 when it runs, 1 otherwise."""
    state = Monitor(load_environment(env)).state()
    if json:
        print_json({"environment": env, "running": state is not None, "url": state.url if state else None})
    else:
        console.print(f"Prometheus for '{env}': {state.url}" if state else f"'{env}': no Prometheus running")
    raise typer.Exit(0 if state else 1)
