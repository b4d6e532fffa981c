"""Rendering kept apart from logic: the same data as a table on a terminal or as JSON for scripts."""

import json
import os
import sys
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

# options more than one command takes
SparkMasterOpt = typer.Option(
    None,
    "--spark-master",
    help="Where summaries run: embedded (dimster's warm Spark server, the default unless "
    "$DIMSTER_SPARK_MASTER says otherwise), sc://HOST:PORT (a Spark Connect server), local[N] or spark://HOST:PORT "
    "(a Spark driver of the summary's own).",
)


class OutputConsole(Console):
    def on_broken_pipe(self) -> None:
        """The reader went away (`| head`, a `| tee` killed): the printing ends, not the command. rich's
        own exits, which ended a run between its workers and its end account (run.json left `running`);
        a run goes on and closes its account, its console.log keeping every line."""
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.file.fileno())  # what is still buffered or printed later goes nowhere
        os.close(devnull)


console = OutputConsole(highlight=False, soft_wrap=True)
err_console = OutputConsole(stderr=True, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def progress(message: str) -> None:
    """Progress of a long command: to stderr, so stdout stays clean for --json."""
    err_console.print(message)


def cluster_table(status) -> Table:
    versions = sorted({n.kafka_version for n in status.nodes if n.kafka_version})
    kafka = f"{status.kafka_version} (mixed: {', '.join(versions)})" if len(versions) > 1 else status.kafka_version
    table = Table(title=f"{status.environment}: Kafka {kafka}, bootstrap {status.bootstrap_servers}")
    for column in ("node", "Kafka", "pid", "process", "registered", "client port", "controller port"):
        table.add_column(column)
    for node in status.nodes:
        table.add_row(
            str(node.node_id),
            node.kafka_version or "-",
            str(node.pid or "-"),
            ("paused" if node.paused else "running" if node.alive else "stopped")
            + (f", isolated from {node.isolated}" if node.isolated else ""),
            "yes" if node.registered else "no",
            str(node.broker_port or "-"),
            str(node.controller_port or "-"),  # a docker node's is inside the cluster's network
        )
    return table
