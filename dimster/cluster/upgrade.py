"""`dimster cluster upgrade`: a `local` cluster goes to another Kafka version one node at a time, under
load if a run goes on (stop the node, start it on the new version's jars with its data and config, wait
until it serves and no partition is under-replicated, then the next), and its feature levels are
finalized when asked, through Kafka's own feature tool (kafka-features) of the new version.

Finalizing names each feature with an explicit level taken from the tool's `version-mapping`, and never
kraft.version: `upgrade --release-version` bumps kraft.version too, which silently and irreversibly
turns the static quorum dimster configures (controller.quorum.voters) into a dynamic one (KAFKA-21426).

Each step is told (`tell(event, message, node)`) as it happens: the CLI prints it and hands it to the
environment's running `dimster run`, whose report draws it."""

import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from dimster.clock import Deadline
from dimster.cluster.backend import ClusterBackend
from dimster.cluster.local import LocalCluster
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.distribution import KafkaDistribution, kafka_distribution
from dimster.kafka.helper import JVM_OPTIONS as TOOL_JVM_OPTIONS
from dimster.kafka.security import java_security
from dimster.paths import environments_dir
from dimster.workload.clients import version_tuple

OLDEST_TARGET = (4, 2)
FEATURE_TOOL = "org.apache.kafka.tools.FeatureCommand"
METADATA = "metadata.version"
NOT_FINALIZED = "kraft.version"  # KAFKA-21426: its bump makes a static quorum dynamic

Tell = Callable[[str, str, int | None], None]  # (event, message, node id or None)


@dataclass
class UpgradeReport:
    environment: str
    to: str
    upgraded_nodes: list[int]  # in the order they went; empty when every node ran `to` already
    features_before: dict[str, str]  # finalized levels as kafka-features describes them
    features_after: dict[str, str]
    finalized: dict[str, int] | None  # the levels --finalize set (empty: none needed; None: not asked)


def rolling_upgrade(cluster: ClusterBackend, to: str, finalize: bool, tell: Tell, progress) -> UpgradeReport:
    """Upgrade every node of `cluster` that does not run `to` yet, one at a time, then (`finalize`)
    finalize the feature levels of `to`'s release. Whatever can be refused is refused before any node
    is touched, in one line."""
    local, versions = _upgradable(cluster, to)
    name = local.profile.name
    tools = kafka_distribution(to)  # fetched now if it must be: before any node goes down
    if tools.version != to:
        raise DimsterError(f"KAFKA_HOME names Kafka {tools.version}, not {to}: unset it to upgrade to {to}")
    if not tools.has_perf_tools:
        raise DimsterError(f"Kafka {to} has no kafka-tools jar here, whose feature tool upgrades need")
    pending = [i for i, n in enumerate(local.profile.node_ids) if versions[n] != to]
    if not pending and not finalize:
        levels = describe_features(local, tools)
        return UpgradeReport(name, to, [], levels, levels, None)
    target = version_mapping(tools, release(to)) if finalize else {}
    old = ", ".join(f"{n} on {v}" for n, v in versions.items())
    if pending and local.profile.nodes > 1:  # no node goes down while a partition lacks a replica
        local.wait_replicas_in_sync(Deadline(local.profile.start_timeout_seconds), progress)
    tell("upgrade_started", f"upgrade to Kafka {to} started (nodes {old})", None)
    try:
        for index in pending:
            _upgrade_node(local, index, tools, tell, progress)
        state = local.recorded_state()
        assert state is not None
        if state.kafka_version != to:  # every node runs `to`: so does the cluster
            state.kafka_version = to
            state.save(local.state_file)
        if record_profile_version(name, to):
            progress(f"run/environments/{name}.yaml: kafkaVersion is {to} now")
        before = describe_features(local, tools)
        progress(f"feature levels: {levels_text(before)}")
        finalized = finalize_features(local, tools, before, target) if finalize else None
        after = describe_features(local, tools) if finalized else before
        if finalized is not None:
            raised = levels_text({n: after.get(n, "?") for n in finalized}) or f"already Kafka {release(to)}'s"
            tell("upgrade_features_finalized", f"features finalized ({raised}; {NOT_FINALIZED} kept)", None)
        main = {n: after[n] for n in (METADATA, "share.version") if n in after}
        outcome = "finalized" if finalize else f"kept: {levels_text(main)}"
        tell("upgrade_done", f"upgrade to Kafka {to} done (feature levels {outcome})", None)
    except BaseException as e:
        why = str(e) if isinstance(e, DimsterError) else f"{type(e).__name__}: {e}"
        tell("upgrade_failed", f"upgrade to Kafka {to} failed: {why}", None)
        raise
    return UpgradeReport(name, to, [local.node_id(i) for i in pending], before, after, finalized)


def _upgradable(cluster: ClusterBackend, to: str) -> tuple[LocalCluster, dict[int, str]]:
    """`cluster` as a local cluster that runs whole, with the version each node runs; `to` as a version
    dimster upgrades it to."""
    profile = cluster.profile
    if profile.backend == "external":
        raise DimsterError(f"'{profile.name}' is an external cluster: dimster upgrades only clusters it runs")
    if not isinstance(cluster, LocalCluster):
        raise DimsterError(
            f"'{profile.name}' is a {profile.backend} cluster: `cluster upgrade` rolls `local` clusters only "
            "(a docker cluster's nodes run the profile's image: change it, then `cluster down` and `up`)"
        )
    if not re.fullmatch(r"\d+\.\d+\.\d+", to):
        raise DimsterError(f"--to '{to}' is not a Kafka version such as 4.4.0")
    if version_tuple(to) < OLDEST_TARGET:
        raise DimsterError(f"--to {to}: dimster upgrades to Kafka {'.'.join(map(str, OLDEST_TARGET))}.0 or newer")
    status = cluster.status()
    if not status.running:
        raise DimsterError(f"'{profile.name}' is not running: `dimster cluster up {profile.name}` first")
    state = cluster.recorded_state()
    assert state is not None  # it runs
    versions = {cluster.node_id(i): state.node_version(i) for i in range(len(state.nodes))}
    if newest := max((v for v in versions.values() if version_tuple(v) > version_tuple(to)), default=None):
        raise DimsterError(
            f"'{profile.name}' runs Kafka {newest}: --to {to} would be a downgrade, which dimster does not do "
            "(a finalized metadata.version cannot go back)"
        )
    away = [n.node_id for n in status.nodes if not (n.alive and n.registered) or n.paused or n.isolated]
    if away:
        raise ClusterError(
            f"nodes {away} of '{profile.name}' are stopped, paused, isolated or not registered: "
            f"`dimster cluster up {profile.name}` brings them back before an upgrade"
        )
    return cluster, versions


def _upgrade_node(local: LocalCluster, index: int, tools: KafkaDistribution, tell: Tell, progress) -> None:
    """Stop node `index` (SIGTERM to its recorded PID), start it on `tools` with its data and config,
    and wait until it serves, every node is registered and no partition is under-replicated."""
    node_id = local.node_id(index)
    state = local.recorded_state()
    assert state is not None
    old, pid = state.node_version(index), state.nodes[index].pid
    began = time.monotonic()
    local.stop_node(index, progress)
    tell("upgrade_node_stopped", f"node {node_id} stopped (Kafka {old}, pid {pid})", node_id)
    local.start_node(index, tools, progress)
    state = local.recorded_state()
    assert state is not None
    tell("upgrade_node_started", f"node {node_id} on Kafka {tools.version} (pid {state.nodes[index].pid})", node_id)
    deadline = Deadline(local.profile.start_timeout_seconds)
    local.wait_serving(index, deadline)
    local.wait_registered(set(local.profile.node_ids), deadline)
    if local.profile.nodes > 1:
        local.wait_replicas_in_sync(deadline, progress)
    took = time.monotonic() - began
    tell("upgrade_node_in_sync", f"node {node_id} in sync ({took:.1f} s after it stopped)", node_id)


def release(version: str) -> str:
    """The release a version belongs to, as kafka-features names it: 4.4.0 -> 4.4."""
    return ".".join(version.split(".")[:2])


def finalize_flags(current: dict[str, int], target: dict[str, int]) -> dict[str, int]:
    """The `--feature name=level` flags that bring `current` levels to `target`: each feature below its
    target, never kraft.version (KAFKA-21426), never one already above (that would be a downgrade)."""
    return {name: level for name, level in target.items() if name != NOT_FINALIZED and current.get(name, 0) < level}


def finalize_features(
    local: LocalCluster, tools: KafkaDistribution, before: dict[str, str], target: dict[str, int]
) -> dict[str, int]:
    """Upgrade the cluster's feature levels to `target` with explicit flags; the levels set."""
    current = {name: int(level) for name, level in before.items() if level.isdigit()}
    if METADATA in before:  # described by name (4.3-IV0): its level is the mapping's of that name
        current[METADATA] = version_mapping(tools, before[METADATA])[METADATA]
    flags = finalize_flags(current, target)
    if not flags:
        return {}
    arguments = [a for name, level in flags.items() for a in ("--feature", f"{name}={level}")]
    result = feature_tool(local, tools, "upgrade", *arguments)
    if result.returncode != 0:
        raise ClusterError(f"kafka-features upgrade on '{local.profile.name}' failed: {_problem(result)}")
    return flags


def describe_features(local: LocalCluster, tools: KafkaDistribution) -> dict[str, str]:
    """The cluster's finalized feature levels, by `kafka-features describe` (metadata.version by name)."""
    result = feature_tool(local, tools, "describe")
    levels = described_levels(result.stdout)
    if result.returncode != 0 or not levels:
        raise ClusterError(f"kafka-features describe on '{local.profile.name}' failed: {_problem(result)}")
    return levels


def described_levels(text: str) -> dict[str, str]:
    """Each feature's finalized level in `kafka-features describe`'s output, whose lines read
    `Feature: share.version   SupportedMinVersion: 0   SupportedMaxVersion: 2   FinalizedVersionLevel: 1 ...`."""
    levels = {}
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        if "Feature" in fields and "FinalizedVersionLevel" in fields:
            levels[fields["Feature"]] = fields["FinalizedVersionLevel"]
    return levels


def version_mapping(tools: KafkaDistribution, release_version: str) -> dict[str, int]:
    """The feature levels of `release_version` (4.4, or a metadata version such as 4.3-IV0), as
    `kafka-features version-mapping` of `tools` says."""
    command = tools.java(FEATURE_TOOL, "version-mapping", "--release-version", release_version, **_QUIET)
    result = _run(command, "version-mapping")
    levels = {}
    for line in result.stdout.splitlines():
        if match := re.fullmatch(r"([a-z][a-z.]*)=(\d+)(?: \(.*\))?", line.strip()):
            levels[match.group(1)] = int(match.group(2))
    if result.returncode != 0 or METADATA not in levels:
        problem = _problem(result)
        raise DimsterError(f"Kafka {tools.version}'s kafka-features knows no release {release_version}: {problem}")
    return levels


_QUIET = {"jvm_options": TOOL_JVM_OPTIONS}  # a short-lived tool's JVM: small, C1 only, its log errors only


def feature_tool(local: LocalCluster, tools: KafkaDistribution, *args: str) -> subprocess.CompletedProcess:
    """Kafka's feature tool against `local`; a secure cluster's client properties reach it on its
    standard input (--command-config /dev/stdin), never a file or its command line."""
    security = java_security(local.client_security())
    config = ("--command-config", "/dev/stdin") if security else ()
    command = tools.java(FEATURE_TOOL, "--bootstrap-server", local.profile.bootstrap_servers, *config, *args, **_QUIET)
    return _run(command, args[0], properties_text(security))


def _run(command: list[str], what: str, stdin: str = "") -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"kafka-features {what} did not finish within 120 s") from None


def properties_text(properties: dict[str, str]) -> str:
    """`properties` as a Java properties file, which Java reads as ISO 8859-1: backslashes and line
    breaks escaped, and every character beyond ASCII as \\uXXXX (UTF-16 code units)."""

    def escaped(value: str) -> str:
        value = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        units = value.encode("utf-16-be")
        codes = (int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2))
        return "".join(chr(c) if c < 128 else f"\\u{c:04x}" for c in codes)

    return "".join(f"{key}={escaped(value)}\n" for key, value in properties.items())


def _problem(result: subprocess.CompletedProcess) -> str:
    lines = [line.strip() for line in (result.stdout + "\n" + result.stderr).splitlines() if line.strip()]
    errors = [line for line in lines if "rror" in line or "xception" in line or "Could not" in line]
    return (errors or lines or [f"exit code {result.returncode}"])[0]


def levels_text(levels: dict[str, str]) -> str:
    return ", ".join(f"{name}={level}" for name, level in levels.items())


def record_profile_version(name: str, version: str) -> bool:
    """Set `kafkaVersion` in the environment's profile to the version its cluster now runs (comments and
    every other line kept), so that later `up`, `redeploy` and runs ask for that version; whether the
    file changed."""
    path = environments_dir() / f"{name}.yaml"
    text = path.read_text()
    new, found = re.subn(r"(?m)^(kafkaVersion:[ \t]*)[\"']?[\w.]+[\"']?", rf"\g<1>{version}", text)
    if not found:
        new = text.rstrip("\n") + f"\nkafkaVersion: {version}\n"
    if new == text:
        return False
    path.write_text(new)
    return True
