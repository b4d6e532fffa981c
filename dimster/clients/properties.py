"""The Kafka properties of each client role, from the workload, and their check by the library
that will run them, before a run starts or changes."""

import json
import subprocess
import sys
from collections.abc import Iterator

from dimster.errors import DimsterError
from dimster.workload.model import Workload

ROLE_SECTIONS = {"producer": "producerConfig", "consumer": "consumerConfig", "share_consumer": "shareConsumerConfig"}


def consumer_role(workload: Workload) -> str:
    return "share_consumer" if workload.consumer_type == "SHARE_GROUP" else "consumer"


def run_libraries(workload: Workload) -> dict[str, str]:
    """The library of each role the run has: its producers and its kind of consumer."""
    return {role: workload.client_library.of(role) for role in ("producer", consumer_role(workload))}


def java_versions(workload: Workload, cluster_version: str) -> dict[str, str]:
    """Role -> the kafka-clients version its Java clients run, for the roles of the run's clients that
    run Java clients (a role's clientVersion is validated only where the run has clients of it)."""
    roles = workload.run_roles()
    return {
        role: workload.client_version.of(role) or cluster_version
        for role, library in run_libraries(workload).items()
        if library == "java" and role in roles
    }


def role_properties(workload: Workload, role: str, group: str = "") -> dict:
    """What a role's client is built from: commonConfig, the role's section, what the workload implies."""
    kc = workload.kafka_config
    if role == "producer":
        return {**kc.common_config, **kc.producer_config}
    if role == "share_consumer":
        properties = {**kc.common_config, **kc.share_consumer_config, "group.id": group}
        if workload.acknowledgement.mode == "EXPLICIT":
            properties["share.acknowledgement.mode"] = "explicit"
        return properties
    return {"auto.offset.reset": "earliest", **kc.common_config, **kc.consumer_config, "group.id": group}


def check_client_configs(workload: Workload, source: str, kafka_version: str) -> None:
    """The properties of the roles the run has, judged by each role's library (Java: of
    `kafka_version`, or the role's clientVersion): the first problem as one error line."""
    if problem := next(_problems(workload, kafka_version), None):
        raise DimsterError(f"{source}: {problem}")


def _problems(workload: Workload, kafka_version: str) -> Iterator[str]:
    common = workload.kafka_config.common_config  # goes to every client of the run
    sections = workload.kafka_config.model_dump(by_alias=True)
    libraries = run_libraries(workload)
    versions = java_versions(workload, kafka_version)
    java_roles: dict[str, list[str]] = {}  # kafka-clients version -> the roles it runs
    for role in (role for role, library in libraries.items() if library == "java"):
        java_roles.setdefault(versions.get(role, kafka_version), []).append(role)
    unknown_common = []  # a commonConfig name needs one of the run's Java clients to know it
    for version, roles in java_roles.items():
        if version == kafka_version:
            from dimster.clients import jvm

            jvm.start_jvm(kafka_version)
            common_problem, problem = java_check(roles, common, sections)
        else:  # this process's JVM holds the cluster's clients: another version is judged aside
            common_problem, problem = _java_check_aside(kafka_version, version, roles, common, sections)
        unknown_common.append(common_problem)
        if problem:
            yield problem
    if unknown_common and all(unknown_common):
        yield unknown_common[0]
    for role in (role for role, library in libraries.items() if library == "librdkafka"):
        from dimster.clients.librdkafka import check_properties

        if problem := check_properties(role, ROLE_SECTIONS[role], common, sections[ROLE_SECTIONS[role]]):
            yield problem


def java_check(roles: list[str], common: dict, sections: dict) -> tuple[str | None, str | None]:
    """What this process's Java clients (the JVM must run) find wrong: (a commonConfig name none of
    the roles knows, the first problem of a role's properties)."""
    from dimster.clients import java

    roles_problem = None
    for role in roles:
        if roles_problem := java.check_properties(role, ROLE_SECTIONS[role], common, sections[ROLE_SECTIONS[role]]):
            break
    return java.check_common_names(roles, common), roles_problem


def _java_check_aside(kafka_version: str, version: str, roles: list[str], common: dict, sections: dict):
    """java_check in a process of its own that runs kafka-clients `version` (fetched if missing;
    its progress shows on stderr)."""
    command = [sys.executable, "-m", "dimster.clients.java_check", kafka_version, version]
    request = json.dumps({"roles": roles, "common": common, "sections": sections})
    try:
        result = subprocess.run(command, input=request, stdout=subprocess.PIPE, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise DimsterError(f"the check of kafka-clients {version}'s properties did not end within 600 s") from None
    if result.returncode != 0:
        raise DimsterError(result.stdout.strip() or f"the check of kafka-clients {version} failed")
    return tuple(json.loads(result.stdout))
