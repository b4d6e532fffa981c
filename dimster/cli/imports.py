"""`dimster import omb FILE [--driver FILE] -o WORKLOAD.yaml`: move over from OpenMessaging Benchmark for
good: the native workload an OMB file runs as, each key commented with the OMB key it came from."""

from pathlib import Path

import typer

from dimster.cli.output import console
from dimster.errors import DimsterError

app = typer.Typer(help="Bring workloads of other tools over as dimster's own.", no_args_is_help=True)


@app.command()
def omb(
    workload: Path = typer.Argument(..., help="An OpenMessaging Benchmark workload file.", show_default=False),
    driver: Path = typer.Option(None, "--driver", help="An OMB Kafka driver file whose settings it takes."),
    output: Path = typer.Option(..., "--output", "-o", help="The workload file to write.", show_default=False),
) -> None:
    """Write the dimster workload an OpenMessaging Benchmark workload (and driver) file runs as."""
    from dimster.workload.model import load_workload
    from dimster.workload.omb import imported

    notes: list[str] = []
    text = imported(workload, driver, output, notes)
    try:
        output.write_text(text)
    except OSError as e:
        raise DimsterError(f"cannot write {output}: {e.strerror}") from None
    load_workload(output)  # what it wrote runs: read back as `dimster run` reads it
    for note in notes:
        console.print(f"note: {note}", markup=False)
    console.print(f"{output}: the workload {workload.name} runs as (dimster run ENV -w {output})", markup=False)
