"""The `dimster` command: typer app, and the one place errors become a line and an exit code."""

import logging
import os
import sys

import typer

from dimster import __version__
from dimster.cli import (
    campaign,
    cluster,
    control,
    explain,
    history,
    image,
    imports,
    monitor,
    report,
    run,
    summary,
    worker,
)  # fmt: skip
from dimster.cli.output import console, err_console
from dimster.environment import known_environments, load_environment
from dimster.errors import DimsterError
from dimster.kafka.distribution import kafka_distribution
from dimster.kafka.jmx_exporter import VERSION as JMX_EXPORTER_VERSION
from dimster.kafka.jmx_exporter import agent_jar
from dimster.results.redaction import redact_text

app = typer.Typer(
    help="Load-test Apache Kafka, above all its share groups. See docs/cli.md.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(cluster.app, name="cluster")
app.add_typer(worker.app, name="worker")
app.add_typer(monitor.app, name="monitor")
app.add_typer(image.app, name="image")
app.add_typer(imports.app, name="import")
app.command(context_settings=run.EXTRA_ARGS)(run.validate)
app.command(context_settings=run.EXTRA_ARGS)(run.run)
app.command(context_settings=run.EXTRA_ARGS)(campaign.campaign)
app.command()(control.status)
app.command()(control.wait)
app.command()(control.stop)
app.command()(summary.summarize)
app.command()(report.report)
app.command()(report.compare)
app.command()(history.history)
app.command()(explain.explain)
kafka_app = typer.Typer(help="The Apache Kafka distribution dimster runs.", no_args_is_help=True)
app.add_typer(kafka_app, name="kafka")


def _version(value: bool) -> None:
    if value:
        console.print(f"dimster {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Load-test Apache Kafka, above all its share groups."""


@kafka_app.command("fetch")
def kafka_fetch(
    version: list[str] = typer.Option(
        [], "--version", help="Kafka version(s); default: every version named in run/environments."
    ),
) -> None:
    """Fetch Kafka jars and the brokers' JMX exporter agent from Maven Central into the cache (nothing
    to do when already there)."""
    versions = version or sorted({load_environment(name).kafka_version for name in known_environments()})
    for wanted in versions:
        distribution = kafka_distribution(wanted)
        tools = "with" if distribution.has_perf_tools else "without"
        console.print(f"Kafka {distribution.version} ready ({tools} perf tools): {distribution.libs}")
    console.print(f"JMX exporter agent {JMX_EXPORTER_VERSION} ready: {agent_jar()}")


def main() -> None:
    # Libraries that log to the root logger (py4j does, when Spark's JVM goes away) must not print
    # tracebacks on the console: dimster reports problems as one line of its own.
    logging.getLogger().addHandler(logging.NullHandler())
    try:
        # Not standalone: usage errors come here, to be one line like every other error.
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except DimsterError as e:
        err_console.print(f"dimster: error: {redact_text(str(e))}", markup=False, soft_wrap=True)
        if e.detail:
            err_console.print(redact_text(e.detail), style="dim", markup=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except typer.TyperException as e:  # click's usage errors (a missing argument, an unknown option)
        ctx = getattr(e, "ctx", None)
        if ctx is not None and e.format_message() == ctx.get_help():
            err_console.print(e.format_message(), markup=False)  # no arguments: the help, as asked
        else:
            hint = f" (see `{ctx.command_path} -h`)" if ctx is not None else ""
            err_console.print(f"dimster: error: {e.format_message()}{hint}", markup=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except typer.Abort:
        err_console.print("dimster: aborted")
        sys.exit(1)
    except KeyboardInterrupt:
        err_console.print("dimster: interrupted")
        sys.exit(130)
    except Exception as e:  # a bug: say what, keep the traceback for those who ask
        if os.environ.get("DIMSTER_DEBUG"):
            raise
        err_console.print(
            f"dimster: internal error: {type(e).__name__}: {e} (DIMSTER_DEBUG=1 shows the traceback)",
            markup=False,
            soft_wrap=True,
        )
        sys.exit(1)
