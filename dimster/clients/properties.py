"""The Kafka properties of each client role, from the workload, and their check by the library
that will run them, before a run starts or changes."""

from dimster.errors import DimsterError
from dimster.workload.model import Workload

ROLE_SECTIONS = {"producer": "producerConfig", "consumer": "consumerConfig", "share_consumer": "shareConsumerConfig"}


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
    """Every role's properties, judged by the role's library (Java: of `kafka_version`)."""
    kc = workload.kafka_config
    sections = kc.model_dump(by_alias=True)
    for role, section in ROLE_SECTIONS.items():
        properties = sections[section]
        if workload.client_library.of(role) == "java":
            from dimster.clients import java, jvm

            jvm.start_jvm(kafka_version)
            problem = java.check_properties(role, section, kc.common_config, properties)
        else:
            from dimster.clients import librdkafka

            problem = librdkafka.check_properties(role, section, kc.common_config, properties)
        if problem:
            raise DimsterError(f"{source}: {problem}")
