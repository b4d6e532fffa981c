"""`dimster cluster ...`: bring an environment's Kafka cluster up, down, redeploy it, look at it."""

from dataclasses import asdict

import typer

from dimster.cli.control import notify_run
from dimster.cli.output import cluster_table, console, print_json, progress
from dimster.cluster.backends import backend_for
from dimster.cluster.nodes import clusters_recorded_up
from dimster.cluster.upgrade import UpgradeReport, levels_text, rolling_upgrade
from dimster.environment import load_environment
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.helper import end_idle_helper
from dimster.pipeline.spark_service import SparkService

app = typer.Typer(help="Manage the Kafka cluster of an environment (run/environments/ENV.yaml).", no_args_is_help=True)

EnvArg = typer.Argument(..., help="Environment name: a file run/environments/ENV.yaml.", show_default=False)
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")


@app.command()
def up(env: str = EnvArg, json: bool = JsonOpt) -> None:
    """Start the cluster (formatting storage on first use) and wait until share groups work.
    A healthy running cluster is reused; its broker config is still checked against the profile's."""
    cluster = backend_for(load_environment(env))
    status = cluster.up(progress)
    cluster.check_running_config(progress)
    if json:
        print_json(status.to_json())
    else:
        console.print(f"'{env}' is up: {len(status.nodes)} broker(s), bootstrap servers {status.bootstrap_servers}")


@app.command()
def down(
    env: str = EnvArg,
    purge: bool = typer.Option(False, "--purge", help="Also delete the cluster's data and logs."),
) -> None:
    """Stop the nodes dimster started for ENV (SIGTERM, SIGKILL after 30 s). Data is kept unless --purge."""
    profile = load_environment(env)
    cluster = backend_for(profile)
    stopped = cluster.down(console.print)  # no --json: its progress and its summary are one stream, in order
    end_idle_helper(profile.kafka_version)  # dimster's Kafka helper, unless another run still uses it
    if not clusters_recorded_up() - {env}:  # the state folder's last cluster: its Spark server, unless in use
        SparkService().stop(if_idle=True)
    if purge:
        cluster.remove_data()
    console.print(f"'{env}': stopped {len(stopped)} node(s)" if stopped else f"'{env}': nothing was running")


@app.command()
def status(env: str = EnvArg, json: bool = JsonOpt) -> None:
    """Nodes, PIDs, Kafka version, ports and health. Exit code 0 when healthy, 1 otherwise."""
    state = backend_for(load_environment(env)).status()
    if json:
        print_json(state.to_json())
    else:
        console.print(cluster_table(state))
        console.print("healthy" if state.healthy else ("unhealthy" if state.running else "not running"))
    raise typer.Exit(0 if state.healthy else 1)


@app.command()
def redeploy(env: str = EnvArg, json: bool = JsonOpt) -> None:
    """Apply the current broker-config file: dynamic properties through the Admin API, the others by
    restarting nodes one at a time. Data is kept."""
    cluster = backend_for(load_environment(env))
    notify_run(env, "cluster_redeploy_started", "cluster redeploy started from another terminal")
    try:
        report = cluster.redeploy(progress)
    except DimsterError as e:
        notify_run(env, "cluster_redeploy_failed", f"cluster redeploy failed: {e}")
        raise
    except Exception as e:  # boundary: whatever went wrong half-way, one line with the cluster's exit code  # noqa: BLE001
        error = ClusterError(f"cluster redeploy of '{env}' failed: {type(e).__name__}: {e}")
        notify_run(env, "cluster_redeploy_failed", str(error))
        raise error from None
    notify_run(
        env,
        "cluster_redeploy_done",
        f"cluster redeploy done: restarted nodes {report.restarted_nodes or 'none'}, dynamic {report.dynamic}",
    )
    if json:
        print_json(report.__dict__)
    else:
        console.print(
            f"'{env}' redeployed: {len(report.dynamic)} dynamic change(s), "
            f"{len(report.restarted)} needing restart, nodes restarted: {report.restarted_nodes or 'none'}"
        )


@app.command()
def upgrade(
    env: str = EnvArg,
    to: str = typer.Option(..., "--to", help="The Kafka version to go to, e.g. 4.4.0 (fetched if missing)."),
    finalize: bool = typer.Option(
        False, "--finalize", help="Then finalize the new release's feature levels (kafka-features; cannot go back)."
    ),
    json: bool = JsonOpt,
) -> None:
    """Upgrade a running `local` cluster to another Kafka version one node at a time, under load if a run
    goes on: each node is stopped, started on the new version with its data, and waited for until it is
    in sync. With --finalize, its feature levels are then raised to the new release's (explicit flags,
    kraft.version left as it is: KAFKA-21426). A run of ENV records every step as an event."""
    cluster = backend_for(load_environment(env))

    def tell(event: str, message: str, node: int | None) -> None:
        progress(message)
        notify_run(env, event, message, **({} if node is None else {"node": node}))

    try:
        report = rolling_upgrade(cluster, to, finalize, tell, progress)
    except DimsterError:
        raise
    except Exception as e:  # boundary: whatever went wrong half-way, one line with the cluster's exit code  # noqa: BLE001
        raise ClusterError(f"cluster upgrade of '{env}' failed: {type(e).__name__}: {e}") from None
    if json:
        print_json(asdict(report))
    else:
        console.print(_upgrade_line(report))


def _upgrade_line(report: UpgradeReport) -> str:
    """What the upgrade left: which nodes went, and at which feature levels the cluster now runs."""
    env, to, levels = report.environment, report.to, report.features_after
    nodes = f"nodes {report.upgraded_nodes} upgraded" if report.upgraded_nodes else "no node needed upgrading"
    if report.finalized is not None:
        done = "finalized" if report.finalized else "already those of its release"
        return (
            f"'{env}' runs Kafka {to} on every node ({nodes}); feature levels {done}: {levels_text(levels)} "
            f"(before: {levels_text(report.features_before)})"
        )
    share = levels.get("share.version")
    dead_letters = "" if share is None or int(share) >= 2 else ", so share groups have no dead-letter queues"
    return (
        f"'{env}' runs Kafka {to} on every node ({nodes}) at its old feature levels "
        f"({levels_text(levels)}{dead_letters}): `dimster cluster upgrade {env} --to {to} --finalize` "
        "raises them, for good (a finalized metadata.version cannot go back)"
    )


@app.command()
def logs(
    env: str = EnvArg,
    node: int | None = typer.Option(None, "--node", help="Only the node with this id; default all."),
    lines: int = typer.Option(40, "--lines", "-n", "-l", min=1, help="How many last lines (-n as tail's)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines (Ctrl-C stops)."),
) -> None:
    """The brokers' server logs (a docker cluster's through the daemon)."""
    cluster = backend_for(load_environment(env))
    logs = cluster.log_lines(lines)
    if node is not None:
        if node not in logs:
            raise DimsterError(f"'{env}' has nodes {', '.join(map(str, logs))}; there is no node {node}")
        logs = {node: logs[node]}
    for node_id, text in logs.items():
        if not text:
            console.print(f"[dim]node {node_id}: no log yet[/dim]")
        for line in text:
            console.print(f"[{node_id}] {line}", markup=False)
    if follow:
        try:
            for node_id, line in cluster.follow_logs(list(logs)):
                console.print(f"[{node_id}] {line}", markup=False)
        except KeyboardInterrupt:
            pass


NodeOpt = typer.Option(..., "--node", "-n", help="The node's id (`dimster cluster status ENV`).", show_default=False)


def _fault(env: str, node: int, action: str) -> None:
    """One fault on one node; the run of ENV, if one goes on, records it as an event."""
    profile = load_environment(env)
    cluster = backend_for(profile)
    node_ids = getattr(profile, "node_ids", None)
    if node_ids is not None and node not in node_ids:
        raise DimsterError(f"'{env}' has nodes {', '.join(map(str, node_ids))}; there is no node {node}")
    done = cluster.fault(node, action, progress)
    notify_run(env, "fault", f"{done} from another terminal", action=action, node=node)
    console.print(f"'{env}': {done}")


@app.command()
def kill(env: str = EnvArg, node: int = NodeOpt) -> None:
    """Kill one node at once (SIGKILL), as a crash would; `cluster up` starts it again with its data."""
    _fault(env, node, "kill")


@app.command()
def pause(env: str = EnvArg, node: int = NodeOpt) -> None:
    """Freeze one node (SIGSTOP): it keeps its connections but answers nothing until `cluster resume`."""
    _fault(env, node, "pause")


@app.command()
def resume(env: str = EnvArg, node: int = NodeOpt) -> None:
    """Let a paused node run again (SIGCONT)."""
    _fault(env, node, "resume")


@app.command()
def restart(env: str = EnvArg, node: int = NodeOpt) -> None:
    """Stop one node cleanly (SIGTERM) and start it again with its data; returns once it serves again."""
    _fault(env, node, "restart")


@app.command()
def isolate(
    env: str = EnvArg,
    node: int = NodeOpt,
    from_clients: bool = typer.Option(False, "--from-clients", help="Cut it off from this host's clients too."),
) -> None:
    """Cut one node off from the other nodes (a network partition) until `cluster rejoin`; needs a
    profile with nodeNetwork (each node in its own network namespace)."""
    _fault(env, node, "isolate-all" if from_clients else "isolate")


@app.command()
def rejoin(env: str = EnvArg, node: int = NodeOpt) -> None:
    """End a node's isolation: it reaches the others again, and they it."""
    _fault(env, node, "rejoin")
