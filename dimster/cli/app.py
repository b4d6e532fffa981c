"""The `dimster` command: typer app, and the one place errors become a line and an exit code.

A command's module is imported when that command runs (or `--help` lists it), not before: `dimster
status` and `dimster run --modify` from a second terminal start in a fraction of a second instead of
loading the coordinator, Spark's client and the report."""

import importlib
import logging
import os
import sys
import traceback

import typer
from typer.core import TyperGroup

from dimster import __version__
from dimster.cli.output import console, err_console
from dimster.errors import DimsterError
from dimster.results.redaction import redact_text

EXTRA_ARGS = {"allow_extra_args": True, "ignore_unknown_options": True}  # `--set k v` pairs
# command -> (module, its function or its typer app, the command's context settings), in --help's order
COMMANDS: dict[str, tuple[str, str, dict | None]] = {
    "cluster": ("dimster.cli.cluster", "app", None),
    "worker": ("dimster.cli.worker", "app", None),
    "monitor": ("dimster.cli.monitor", "app", None),
    "image": ("dimster.cli.image", "app", None),
    "k8s": ("dimster.cli.k8s", "app", None),
    "import": ("dimster.cli.imports", "app", None),
    "validate": ("dimster.cli.validate", "validate", EXTRA_ARGS),
    "run": ("dimster.cli.run", "run", EXTRA_ARGS),
    "campaign": ("dimster.cli.campaign", "campaign", EXTRA_ARGS),
    "status": ("dimster.cli.control", "status", None),
    "wait": ("dimster.cli.control", "wait", None),
    "stop": ("dimster.cli.control", "stop", None),
    "summarize": ("dimster.cli.summary", "summarize", None),
    "report": ("dimster.cli.report", "report", None),
    "compare": ("dimster.cli.report", "compare", None),
    "history": ("dimster.cli.history", "history", None),
    "explain": ("dimster.cli.explain", "explain", None),
    "tune": ("dimster.cli.tune", "tune", EXTRA_ARGS),
    "spark": ("dimster.cli.spark", "app", None),
}


def _typer(**settings) -> typer.Typer:
    return typer.Typer(pretty_exceptions_enable=False, rich_markup_mode=None, **settings)


class LazyCommands(TyperGroup):
    """The root group: COMMANDS are built from their modules on first use."""

    def list_commands(self, ctx):  # click's Context: typer vendors click
        return [*COMMANDS, *super().list_commands(ctx)]

    def get_command(self, ctx, cmd_name: str):
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module_name, attribute, settings = COMMANDS[cmd_name]
        module = importlib.import_module(module_name)
        target = getattr(module, attribute)
        holder = _typer()
        holder.callback()(lambda: None)  # a group, so that the one command keeps its name
        if isinstance(target, typer.Typer):
            holder.add_typer(target, name=cmd_name)
        else:  # a module's EPILOG: what its --help lists after the options (options typer cannot declare)
            holder.command(name=cmd_name, context_settings=settings, epilog=getattr(module, "EPILOG", None))(target)
        return typer.main.get_group(holder).commands[cmd_name]


app = _typer(
    cls=LazyCommands,
    help="Load-test Apache Kafka, above all its share groups. See docs/cli.md.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
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
    from dimster.environment import known_environments, load_environment
    from dimster.kafka.distribution import kafka_distribution
    from dimster.kafka.jmx_exporter import VERSION as JMX_EXPORTER_VERSION
    from dimster.kafka.jmx_exporter import agent_jar

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
    except Exception as e:  # a bug: say what, keep the traceback for those who ask; masked as any line  # noqa: BLE001
        if os.environ.get("DIMSTER_DEBUG"):
            err_console.print(redact_text("".join(traceback.format_exception(e))), markup=False, soft_wrap=True)
        else:
            line = f"dimster: internal error: {type(e).__name__}: {e} (DIMSTER_DEBUG=1 shows the traceback)"
            err_console.print(redact_text(line), markup=False, soft_wrap=True)
        sys.exit(1)
