"""A campaign's points checked against the environment they would run on, before anything runs or is
applied: `dimster campaign` (and its `--dry-run`) and `dimster k8s render -c` refuse the same points."""

from dimster.campaign.environments import check_varied, point_profile
from dimster.campaign.model import Campaign, Point
from dimster.clients.properties import check_client_configs
from dimster.cluster.backends import backend_for
from dimster.coordinator.loop.one_run import (
    check_group_and_topic_configs,
    check_overlaid,
    check_replication,
    with_workload_broker_config,
)
from dimster.environment import EnvironmentProfile
from dimster.errors import DimsterError


def check_points(loaded: Campaign, profile: EnvironmentProfile) -> None:
    """The environments the points vary (`cluster.` keys), every point's client properties (by their
    libraries) and, where dimster runs the brokers, every broker config a point asks for (by Kafka's
    own parser and the backend's rules), each on the point's own environment."""
    check_varied(profile, {key for p in loaded.points for key in p.environment}, loaded.source)
    seen_clients, seen_brokers, seen_entities, seen_environments = set(), set(), set(), set()
    for point in loaded.points:
        w = point.workload
        on = point_profile(profile, point.environment, loaded.source)
        check_replication(w, on, f"{loaded.source}: {where(point)}")
        clients = repr((w.client_library, w.client_version, w.kafka_config, w.consumer_type, w.acknowledgement))
        if (clients, on.kafka_version) not in seen_clients:
            seen_clients.add((clients, on.kafka_version))
            check_client_configs(w, f"{loaded.source}: {where(point)}", on.kafka_version)
        brokers = repr((sorted(w.broker_config.items()), on.kafka_version))
        if w.broker_config and brokers not in seen_brokers:
            seen_brokers.add(brokers)
            try:  # an external cluster's is refused before any point runs
                with_brokers = with_workload_broker_config(w, on)
            except DimsterError as e:
                raise DimsterError(f"{loaded.source}: {where(point)}: {e}") from None
            if (environment := repr(on)) not in seen_environments:  # the environment's own, blamed on its files
                seen_environments.add(environment)
                backend_for(on).check_broker_config()
            check_overlaid(with_brokers, on, f"{loaded.source}: {where(point)}")  # the point's, on the campaign
        entities = repr((w.group_config, w.kafka_config.topic_config, on.kafka_version))
        if entities not in seen_entities:
            seen_entities.add(entities)
            check_group_and_topic_configs(w, f"{loaded.source}: {where(point)}", on.kafka_version)


def where(point: Point) -> str:
    return f"point {point.index} ({point.label})"
