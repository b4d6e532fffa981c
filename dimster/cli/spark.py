"""`dimster spark ...`: dimster's warm Spark server (pipeline/spark_service.py), seen and stopped."""

import typer

from dimster.cli.output import console, print_json
from dimster.pipeline.spark_service import SparkService

app = typer.Typer(help="dimster's warm Spark server, which summarizes runs: its status, its end.", no_args_is_help=True)


@app.command()
def status(json: bool = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")) -> None:
    """Whether the server runs, its PID, URL and PySpark version. Exit code 0 when it runs, 1 otherwise."""
    service = SparkService()
    server = service.running()
    found = {"running": server is not None, "log": str(service.log)}
    if server is not None:
        found |= {"pid": server.process.pid, "url": server.url, "version": server.version}
    if json:
        print_json(found)
    elif server is None:
        console.print("dimster's Spark server is not running (the next summary starts it)")
    else:
        console.print(f"dimster's Spark server runs: PID {server.process.pid}, {server.url}, PySpark {server.version}")
    raise typer.Exit(0 if server is not None else 1)


@app.command()
def stop() -> None:
    """End the server once no summary runs on it (one that does is waited for); the next summary starts
    a fresh one."""
    ended = SparkService().stop()
    console.print("dimster's Spark server: stopped" if ended else "dimster's Spark server was not running")
