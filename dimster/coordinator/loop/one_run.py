"""One run of one workload, start to end, as a plain function: the CLI's `dimster run` calls it, and
so will anything that runs many (campaigns). It brings the cluster up or reuses it, connects the
workers, runs the coordinator and closes everything; it returns what happened instead of exiting, and
leaves printing and the summary to its caller."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dimster.clients.properties import check_client_configs, java_versions
from dimster.cluster.backends import backend_for
from dimster.coordinator.control.api import ControlServer
from dimster.coordinator.control.exporter import StatusExporter
from dimster.coordinator.live.faults import check_faults
from dimster.coordinator.loop.failures import RunFailed
from dimster.coordinator.loop.run import Coordinator
from dimster.coordinator.workers.launchers import workers_for
from dimster.coordinator.workers.topology import worker_versions
from dimster.environment import EnvironmentProfile
from dimster.errors import DimsterError
from dimster.kafka.broker_config import check_names, config_definitions
from dimster.kafka.distribution import kafka_distribution
from dimster.kafka.entity_configs import check_entity_configs
from dimster.monitor import announce_run
from dimster.paths import display
from dimster.results.bundle import ResultsBundle
from dimster.workload.model import Workload


@dataclass
class RunOutcome:
    bundle: Path
    status: str  # completed | forced | failed
    exit_code: int  # what `dimster run` exits with: 0, or RunFailed's code
    failure: str | None = None
    totals: Mapping[str, Any] = field(default_factory=dict)  # run.json's (records.Totals)
    stopped_early: bool = False  # Ctrl-C or `dimster stop` ended it before its plan did
    mode: Mapping[str, Any] = field(default_factory=dict)  # run.json's: what the test mode found
    aborted_by: str | None = None  # the abortOnFail threshold that stopped it early


def run_workload(
    workload: Workload,
    profile: EnvironmentProfile,
    results_root: Path,
    control: ControlServer | None = None,
    say: Callable[[str], None] = print,
    progress: Callable[[str], None] = print,
    context: dict | None = None,
    on_started: Callable[[], None] = lambda: None,
) -> RunOutcome:
    """Run `workload` on the cluster of `profile`; results go to a new bundle under `results_root`.
    Raises DimsterError when the run cannot start (bad input, cluster, workers); a run that started
    and failed is an outcome. `control`, when given, serves the run and is closed at its end;
    `context` goes into the run's status (a campaign's point); `on_started` is called once the cluster
    is up and the workers started."""
    profile = with_workload_broker_config(workload, profile)
    check_faults(workload, profile)
    check_client_versions(workload, profile)
    launcher = workers_for(profile, progress)
    launcher.connect(workload.name)  # agents answer before anything else starts
    cluster = backend_for(profile)
    try:
        cluster.ensure(progress)  # before worker containers: they may join the network `up` makes
        launcher.start(cluster, workload.name)
        on_started()
        client_bootstrap = profile.client_bootstrap_servers or launcher.client_bootstrap
        return _run_on(workload, profile, cluster, launcher, results_root, control, say, context, client_bootstrap)
    finally:
        launcher.close()


def with_workload_broker_config(workload: Workload, profile: EnvironmentProfile) -> EnvironmentProfile:
    """The profile with the workload's `brokerConfig` over its own; refused for an external cluster,
    whose brokers dimster neither configures nor restarts."""
    if not workload.broker_config:
        return profile
    if profile.backend == "external":
        keys = ", ".join(sorted(workload.broker_config))
        raise DimsterError(
            f"workload '{workload.name}': brokerConfig ({keys}) cannot apply to '{profile.name}', an external "
            "cluster: change its broker config where it runs and drop brokerConfig from the workload"
        )
    return profile.with_broker_config(workload.broker_config)


def check_on_environment(workload: Workload, profile: EnvironmentProfile, source: str) -> None:
    """What a run of `workload` on `profile` would refuse, found before anything starts or is applied
    (`dimster validate --env`, `dimster k8s render`): its client properties by the cluster's Kafka
    version, the broker config it would run with (the profile's and the workload's `brokerConfig`, by
    Kafka's names and the backend's own rules) and a replicationFactor above the brokers' count."""
    check_client_configs(workload, source, profile.kafka_version)
    on = with_workload_broker_config(workload, profile)
    if on.backend != "external":  # dimster knows no broker config of an external cluster
        backend_for(profile).check_broker_config()
        if on is not profile:
            check_overlaid(on, profile, source)
    check_replication(workload, on, source)
    check_group_and_topic_configs(workload, source, profile.kafka_version)


def check_workload_configs(workload: Workload, source: str, kafka_version: str) -> None:
    """Without an environment (`dimster validate`): the workload's brokerConfig names, groupConfig and
    topicConfig by the definitions of Kafka `kafka_version`."""
    if workload.broker_config:
        definitions = config_definitions(kafka_distribution(kafka_version))
        check_names(workload.broker_config, definitions, f"{source}: brokerConfig")
    check_group_and_topic_configs(workload, source, kafka_version)


def check_group_and_topic_configs(workload: Workload, source: str, kafka_version: str) -> None:
    """The workload's groupConfig and topicConfig by Kafka `kafka_version`'s own definitions."""
    check_entity_configs(workload.group_config, workload.kafka_config.topic_config, source, kafka_version)


def check_replication(workload: Workload, profile: EnvironmentProfile, source: str) -> None:
    """The workload's replicationFactor fits the brokers of `profile` (where dimster knows them)."""
    nodes, replication = getattr(profile, "nodes", None), workload.replication_factor
    if replication and isinstance(nodes, int) and replication > nodes:
        raise DimsterError(
            f"{source}: replicationFactor {replication} needs {replication} brokers; '{profile.name}' has {nodes}"
        )


def check_overlaid(on: EnvironmentProfile, profile: EnvironmentProfile, source: str) -> None:
    """The profile's broker config with the workload's `brokerConfig` over it, the profile's own being
    good: what is refused now is the workload's, and its line names the workload's file."""
    try:
        backend_for(on).check_broker_config()
    except DimsterError as e:
        profile_files = (display(profile.broker_config_path), f"run/environments/{profile.name}.yaml")
        message = str(e)
        for name in profile_files:
            message = message.removeprefix(f"{name}: ")
        raise DimsterError(f"{source}: brokerConfig: {message}") from None


def check_client_versions(workload: Workload, profile: EnvironmentProfile) -> None:
    """Before anything starts: the run's kafka-clients versions fit the profile's workers (a JVM per
    worker holds one version; worker containers hold the cluster's only)."""
    versions = java_versions(workload, profile.kafka_version)
    launcher = workers_for(profile)
    launcher.check_client_versions(versions)
    worker_versions(versions, launcher.count, profile.kafka_version)  # one line when there are too few


def _run_on(workload, profile, cluster, launcher, results_root, control, say, context, client_bootstrap) -> RunOutcome:
    status = cluster.status()
    bundle = ResultsBundle(results_root, workload.name)
    bundle.start(
        workload=workload.to_yaml_dict(),
        environment=profile.model_dump(by_alias=True),
        broker_config=cluster.broker_config(),
        kafka_version=status.kafka_version,
        run_id=bundle.path.name,
        java_clients=java_versions(workload, profile.kafka_version),  # what the coordinator gives the workers
        brokers=[node.node_id for node in status.nodes if node.registered],
    )
    labels = {"environment": profile.name, "run": bundle.path.name, "workload": workload.name}
    exporter = StatusExporter({**labels, "mode": workload.mode.type}) if profile.metrics_endpoint else None
    target = None
    failure = None
    try:
        target = announce_run(profile.name, bundle.path.name, exporter.address, labels) if exporter else None
        if control:
            control.update(run_id=bundle.path.name, results=str(bundle.path), metrics=exporter and exporter.url)
            control.redactor = bundle.redactor  # the API masks the secrets the run knows
        workers, capacity = launcher.workers(bundle)
        coordinator = Coordinator(
            workload,
            cluster,
            bundle,
            workers,
            capacity,
            control=control,
            say=lambda line: say(bundle.redact_text(line)),
            on_worker_loss=profile.on_worker_loss,
            client_bootstrap=client_bootstrap,
            context=context,
            exporter=exporter,
        )
        try:
            exit_code = coordinator.run()
        except RunFailed as e:
            exit_code, failure = e.exit_code, bundle.redact_text(str(e))  # the secrets the run knows masked
    finally:
        if exporter:
            exporter.close()
        if target:
            target.unlink(missing_ok=True)
        bundle.copy_broker_logs(cluster.log_files())
        bundle.scrub_logs()
        if control:
            control.close()  # the run is over: free the environment before anything else
    if workload.omb_result is not None:
        write_omb_file(bundle.path, workload, say)
    info = bundle.run_info
    return RunOutcome(
        bundle.path,
        info.get("status", "failed"),
        exit_code,
        failure,
        info.get("totals", {}),
        stopped_early=coordinator.stop_requested > 0,
        mode=info.get("mode", {}),
        aborted_by=info.get("aborted_by"),
    )


def write_omb_file(run_dir: Path, workload: Workload, say: Callable[[str], None]) -> None:
    """omb-result.json (OpenMessaging Benchmark's TestResult) of a run whose workload asks for it; a
    run it cannot be written for says why in one line, and its own result stands."""
    from dimster.results.omb_result import write_omb_result

    asked = workload.omb_result
    assert asked is not None
    share = " (share groups)" if workload.consumer_type == "SHARE_GROUP" else ""  # beside OMB's own series
    try:
        path = write_omb_result(run_dir, asked.workload or workload.name, asked.driver + share)
    except DimsterError as e:
        say(f"note: {e}")
        return
    say(f"omb-result.json: {path}")
