"""`dimster worker serve` and `dimster worker status`: agents that run a coordinator's clients on
other hosts (docs/distributed.md)."""

import logging
import platform
import signal
from pathlib import Path

import typer

from dimster import __version__
from dimster.cli.output import console, print_json
from dimster.remote.security import TOKEN_ENV, read_token
from dimster.worker.protocol import PROTOCOL_VERSION, Hello

app = typer.Typer(help="Agents that run workers on other hosts.", no_args_is_help=True)
TokenOpt = typer.Option(None, "--token-file", help=f"File holding the shared worker token (default: ${TOKEN_ENV}).")


@app.command()
def serve(
    listen: str = typer.Option(..., "--listen", help="HOST:PORT to listen on (an address coordinators reach)."),
    token_file: Path = TokenOpt,
    work_dir: Path = typer.Option(None, "--work-dir", help="Folder for the runs' worker logs (default: temp)."),
    slots: int = typer.Option(
        1, "--workers", min=1, max=256, help="Worker processes a run may start here (one per core is a good start)."
    ),
    allow_property: list[str] = typer.Option(
        [],
        "--allow-property",
        help="Let coordinators set this client property that loads code, runs a command "
        "or names a file or URL on this host (repeatable; docs/distributed.md lists them).",
        show_default=False,
    ),
    allow_files_under: list[Path] = typer.Option(
        [],
        "--allow-files-under",
        help="Let client properties name files under this folder (repeatable).",
        show_default=False,
    ),
) -> None:
    """Serve runs: one at a time, to coordinators that hold the token. Stops on SIGTERM or Ctrl-C."""
    from dimster.remote.agent import Agent
    from dimster.remote.allowances import Allowances

    allowances = Allowances.of_options(allow_property, allow_files_under)
    token = read_token(token_file)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s", force=True)
    agent = Agent(listen, token, work_dir, allowances, slots)

    def stop(_signum, _frame):
        agent.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    where = f"host {platform.node()}, {slots} worker(s) a run"
    console.print(f"dimster {__version__} agent on {listen} (protocol {PROTOCOL_VERSION}), {where}")
    try:
        agent.serve()
    finally:
        agent.close()


@app.command()
def status(
    address: str = typer.Argument(..., help="HOST:PORT of an agent.", show_default=False),
    token_file: Path = TokenOpt,
    json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Is the agent up, which version, busy or idle. Exit 3 when it cannot be reached or refuses."""
    import zmq

    from dimster.coordinator.workers.agent_handshake import handshake

    token = read_token(token_file)
    context = zmq.Context()
    try:
        hello = Hello(__version__, PROTOCOL_VERSION, "", platform.node(), status_only=True)
        socket, welcome = handshake(context, address, token, hello, timeout=5.0)
        socket.close()
    finally:
        context.term()
    answer = {
        "address": address,
        "up": True,
        "dimster": welcome.dimster_version,
        "protocol": welcome.protocol_version,
        "host": welcome.host,
        "cores": welcome.cores,
        "workers": welcome.slots,
        "memoryBytes": welcome.memory_bytes,
        "busy": bool(welcome.busy_with),
        "busyWith": welcome.busy_with or None,
    }
    if json:
        print_json(answer)
        return
    state = f"busy with {welcome.busy_with}" if welcome.busy_with else "idle"
    console.print(
        f"{address}: up, dimster {welcome.dimster_version} (protocol {welcome.protocol_version}), host {welcome.host}, "
        f"{welcome.cores} cores, {welcome.memory_bytes / 2**30:.1f} GiB, {welcome.slots} worker(s) a run; {state}",
        markup=False,
    )
