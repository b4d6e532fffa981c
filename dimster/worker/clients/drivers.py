"""The Kafka client (driver) of a load client, built from the current workload through the plug of
its role's library (dimster/clients/): its properties, the cluster's security in the library's
names, and the payload bodies of a producer."""

from dimster.clients import ConsumerDriver, ProducerDriver, library
from dimster.clients.properties import role_properties
from dimster.worker.protocol import ConsumerSpec, ProducerSpec
from dimster.workload.model import Workload
from dimster.workload.modes import checksums
from dimster.workload.payload import body_count, make_bodies


def client_properties(workload: Workload, bootstrap: str, security: dict, role: str, group: str = "") -> dict:
    """A role's properties: the cluster's address and security (in the role's library's names, after the
    workload's own: the profile says how to reach the cluster) and the workload's."""
    plug = library(workload.client_library.of(role))
    return {"bootstrap.servers": bootstrap, **role_properties(workload, role, group), **plug.client_security(security)}


def _batch_size(properties: dict) -> int | None:
    value = properties.get("batch.size")
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _compressed(properties: dict) -> bool:
    codec = properties.get("compression.type", properties.get("compression.codec", "none"))
    return str(codec).lower() != "none"


def producer_driver(
    workload: Workload, bootstrap: str, client_id: str, spec: ProducerSpec, on_stats, security: dict
) -> ProducerDriver:
    properties = client_properties(workload, bootstrap, security, "producer")
    payload, size = workload.payload, workload.message_size
    count = payload.count or body_count(size, _compressed(properties), _batch_size(properties))
    bodies = make_bodies(
        size,
        payload.type,
        payload.compressible_ratio,
        count,
        checksum=checksums(workload),
        zeros=payload.zeros,
        data=payload.file_bytes(),
    )
    new_driver = library(workload.client_library.producer).PRODUCER
    return new_driver(properties, client_id, spec.topic, spec.producer_id, bodies, on_stats)


def consumer_properties(workload: Workload, bootstrap: str, client_id: str, spec: ConsumerSpec, security: dict) -> dict:
    """The Kafka properties of consumer `client_id`: with staticMembership its group.instance.id is its
    client id, the same across its restarts, so that it keeps its partitions."""
    role = "share_consumer" if spec.kind == "SHARE_GROUP" else "consumer"
    properties = client_properties(workload, bootstrap, security, role, spec.group)
    if workload.static_membership:
        properties["group.instance.id"] = client_id
    return properties


def consumer_driver(
    workload: Workload, bootstrap: str, client_id: str, spec: ConsumerSpec, on_stats, security: dict
) -> ConsumerDriver:
    share = spec.kind == "SHARE_GROUP"
    role = "share_consumer" if share else "consumer"
    properties = consumer_properties(workload, bootstrap, client_id, spec, security)
    new_driver = library(workload.client_library.of(role)).CONSUMER
    return new_driver(properties, client_id, share, on_stats, verify=checksums(workload))
