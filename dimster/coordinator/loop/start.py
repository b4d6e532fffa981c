"""The start of a run, before load: the topics, the groups' effective configs, and what each worker is
told to run."""

from collections.abc import Callable
from typing import cast

from confluent_kafka import KafkaException

from dimster.coordinator.control.run_log import RunLog
from dimster.coordinator.observers.run_kafka import RunKafka
from dimster.coordinator.workers.ensemble import Ensemble
from dimster.coordinator.workers.topology import Topology
from dimster.errors import DimsterError
from dimster.kafka.security import ClientSecurity
from dimster.results.bundle import ResultsBundle
from dimster.results.records import WorkerPlace
from dimster.worker.protocol import Assignment
from dimster.workload.model import DEFAULT_LOCK_MS, LOCK_DURATION, Workload


def prepare_topics(kafka: RunKafka, workload: Workload, topology: Topology, bundle: ResultsBundle, log: RunLog):
    """Create the run's topics and keep the groups' effective configs at start (every group of a run
    gets the same) in run.json. Returns the broker's delivery-count limit for share groups and the
    groups' record lock duration (ms)."""
    limit = kafka.prepare(workload, topology.topics, list(topology.groups))
    bundle.run_info.update({"topics": topology.topics, "groups": topology.groups})
    if queue := workload.dead_letter_queue:
        created = "dimster" if kafka.dead_letter_created else ("broker" if not queue.create_topic else "before the run")
        bundle.run_info["deadLetterQueue"] = {
            "topic": kafka.dead_letter_topic, "copyRecord": queue.copy_record, "createTopic": queue.create_topic,
            "createdBy": created,
        }  # fmt: skip
    if not topology.groups:
        return limit, DEFAULT_LOCK_MS
    prefix = "share." if workload.consumer_type == "SHARE_GROUP" else "consumer."
    try:
        effective = kafka.group_config(next(iter(topology.groups)), prefix)
    except (DimsterError, KafkaException, TimeoutError) as e:  # the cluster's: a note, the numbers stand
        log.say(f"-- the groups' config could not be read at start: {e}")
        return limit, DEFAULT_LOCK_MS
    bundle.run_info["groupConfig"] = {"start": effective}
    bundle.save_run_info()
    return limit, int(effective.get(LOCK_DURATION) or DEFAULT_LOCK_MS)


def assignment_for(
    workload: Workload,
    topology: Topology,
    ensemble: Ensemble,
    bootstrap: str,
    kafka_version: str,
    security: ClientSecurity,
    limits: tuple[int, int],
) -> Callable[[int, list, list], Assignment]:
    """What worker `index` is told to run (`limits`: the delivery-count limit and the record lock)."""
    # consumers join before load starts, paused or not: paused ones leave once it has
    settings = workload.model_copy(update={"consumers_paused": False}).model_dump(by_alias=True)

    def assignment(index: int, producers: list, consumers: list) -> Assignment:
        return Assignment(
            worker_index=index,
            bootstrap_servers=bootstrap,
            workload=settings,
            producers=producers,
            consumers=consumers,
            total_producers=max(1, len(topology.producers)),
            delivery_count_limit=limits[0],
            log_file="",
            kafka_version=kafka_version,
            java_clients_version=ensemble.worker_versions[index],
            record_lock_ms=limits[1],
            client_security=dict(security or {}),  # a worker takes no security and an empty one alike
        )

    return assignment


def record_workers(described: list[dict], ensemble: Ensemble, bundle: ResultsBundle) -> None:
    """Where each worker runs, with its client counts, as events and in run.json."""
    counts = ensemble.client_counts()
    for where in described:
        details = {k: v for k, v in where.items() if k not in ("index", "alive")}
        bundle.event("worker_started", worker=where["index"], **details, **counts[where["index"]])
    bundle.run_info["workers"] = [cast(WorkerPlace, {k: v for k, v in w.items() if k != "alive"}) for w in described]
    bundle.save_run_info()
