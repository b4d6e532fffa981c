"""The Kafka properties of each client role, from the workload, and their check by the library
that will run them, before a run starts or changes."""

from dimster.errors import DimsterError
from dimster.workload.model import Workload

ROLE_SECTIONS = {"producer": "producerConfig", "consumer": "consumerConfig", "share_consumer": "shareConsumerConfig"}


def property_text(value) -> str:
    """A property value as Kafka's config parsers read it: `true`, not `True`."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def consumer_role(workload: Workload) -> str:
    return "share_consumer" if workload.consumer_type == "SHARE_GROUP" else "consumer"


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
    """The properties of the roles the run has (producers, and its kind of consumer), judged by each
    role's library (Java: of `kafka_version`). commonConfig goes to every client of the run."""
    kc = workload.kafka_config
    sections = kc.model_dump(by_alias=True)
    roles = {role: workload.client_library.of(role) for role in ("producer", consumer_role(workload))}
    if "java" in roles.values():
        from dimster.clients import java, jvm

        jvm.start_jvm(kafka_version)
        java_roles = [role for role, library in roles.items() if library == "java"]
        if problem := java.check_common_names(java_roles, kc.common_config):
            raise DimsterError(f"{source}: {problem}")
    for role, library in roles.items():
        section = ROLE_SECTIONS[role]
        if library == "java":
            problem = java.check_properties(role, section, kc.common_config, sections[section])
        else:
            from dimster.clients import librdkafka

            problem = librdkafka.check_properties(role, section, kc.common_config, sections[section])
        if problem:
            raise DimsterError(f"{source}: {problem}")
