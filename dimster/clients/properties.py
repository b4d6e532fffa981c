"""The Kafka properties of each client role, from the workload, and their check by the library
that will run them (its plug's `check`), before a run starts or changes."""

from collections.abc import Iterator

from dimster.client_libraries import LIBRARIES
from dimster.clients import library
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
    libraries = run_libraries(workload)
    for name in reversed(LIBRARIES):  # java's problems first, then librdkafka's
        if roles := [role for role, library_name in libraries.items() if library_name == name]:
            yield from library(name).check(workload, roles, kafka_version)
