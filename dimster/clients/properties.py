"""The Kafka properties of each client role, from the workload, and their check by the library
that will run them, before a run starts or changes."""

from collections.abc import Iterator

from dimster.errors import DimsterError
from dimster.workload.model import Workload

ROLE_SECTIONS = {"producer": "producerConfig", "consumer": "consumerConfig", "share_consumer": "shareConsumerConfig"}


def property_text(value) -> str:
    """A property value as Kafka's config parsers read it: `true`, not `True`."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def consumer_role(workload: Workload) -> str:
    return "share_consumer" if workload.consumer_type == "SHARE_GROUP" else "consumer"


def run_libraries(workload: Workload) -> dict[str, str]:
    """The library of each role the run has: its producers and its kind of consumer."""
    return {role: workload.client_library.of(role) for role in ("producer", consumer_role(workload))}


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
    `kafka_version`): the first problem as one error line."""
    if problem := next(_problems(workload, kafka_version), None):
        raise DimsterError(f"{source}: {problem}")


def _problems(workload: Workload, kafka_version: str) -> Iterator[str]:
    common = workload.kafka_config.common_config  # goes to every client of the run
    sections = workload.kafka_config.model_dump(by_alias=True)
    libraries = run_libraries(workload)
    if java_roles := [role for role, library in libraries.items() if library == "java"]:
        from dimster.clients import java, jvm

        jvm.start_jvm(kafka_version)
        yield from filter(None, [java.check_common_names(java_roles, common)])
    for role, library in libraries.items():
        if library == "java":
            check = java.check_properties
        else:
            from dimster.clients.librdkafka import check_properties as check
        if problem := check(role, ROLE_SECTIONS[role], common, sections[ROLE_SECTIONS[role]]):
            yield problem
