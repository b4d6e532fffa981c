"""Which clients a run has, what they are called, and which worker hosts each."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dimster.errors import DimsterError
from dimster.worker.protocol import ConsumerSpec, ProducerSpec
from dimster.workload.model import Workload


@dataclass
class Topology:
    topics: list[str]
    groups: dict[str, str]  # group -> its topic
    producers: list[ProducerSpec]
    consumers: list[ConsumerSpec]
    # Ids are never reused within a run: a producer id keys its sequence numbers.
    next_producer_id: int = 0
    next_consumer_id: int = 0


def build_topology(workload: Workload, run_tag: str) -> Topology:
    topics = [f"{workload.name}-{run_tag}-{t}" for t in range(workload.topics)]
    producers: list[ProducerSpec] = []
    consumers: list[ConsumerSpec] = []
    groups: dict[str, str] = {}
    for t, topic in enumerate(topics):
        for i in range(workload.producers_per_topic):
            producers.append(ProducerSpec(len(producers), topic, i))
        for g in range(workload.groups_per_topic):
            group = f"{workload.name}-{run_tag}-t{t}-g{g}"
            groups[group] = topic
            for _ in range(workload.consumers_per_group):
                consumers.append(ConsumerSpec(len(consumers), topic, group, workload.consumer_type))
    return Topology(topics, groups, producers, consumers, len(producers), len(consumers))


def client_id(spec: ProducerSpec | ConsumerSpec) -> str:
    return f"p{spec.producer_id}" if isinstance(spec, ProducerSpec) else f"c{spec.consumer_id}"


def role_of(spec: ProducerSpec | ConsumerSpec) -> str:
    if isinstance(spec, ProducerSpec):
        return "producer"
    return "share_consumer" if spec.kind == "SHARE_GROUP" else "consumer"


def worker_versions(versions: dict[str, str], workers: int, cluster_version: str) -> list[str]:
    """The kafka-clients version of each worker's JVM. A JVM holds one version: where the run's Java
    clients have several, worker w runs the (w mod several)-th, so at least that many workers are needed."""
    distinct = sorted(set(versions.values())) or [cluster_version]
    if workers < len(distinct):
        roles = ", ".join(f"{role} {version}" for role, version in sorted(versions.items()))
        raise DimsterError(
            f"clientVersion: the run's Java clients need {len(distinct)} kafka-clients versions ({roles}) and "
            f"a worker's JVM holds one, but the environment has {workers} worker(s): give it {len(distinct)} "
            "or more (workers: N), or one version to every Java role"
        )
    return [distinct[w % len(distinct)] for w in range(workers)]


def pools(versions: dict[str, str], per_worker: list[str]) -> Callable[[ProducerSpec | ConsumerSpec], Sequence[int]]:
    """The workers a client may go on: those whose JVM runs its role's version (every worker where the
    run has a single Java version, or the client runs librdkafka)."""
    everyone = range(len(per_worker))
    if len(set(per_worker)) <= 1:
        return lambda spec: everyone
    by_version = {v: [w for w, mine in enumerate(per_worker) if mine == v] for v in set(per_worker)}
    return lambda spec: by_version[versions[role]] if (role := role_of(spec)) in versions else everyone


def place(
    topology: Topology, workers: int, pool_of: Callable[[ProducerSpec | ConsumerSpec], Sequence[int]] | None = None
) -> dict[str, int]:
    """Client id -> worker index. Producers and consumers go on workers of their own wherever there
    are two or more (`split_roles`): producers in a worker process with hundreds of consumers are
    slowed there, and their publish figures with them (docs/scenarios/full-scale.md). Each role's
    clients are dealt over its workers in turn, so each gets a similar mix of topics and groups. With
    `pool_of`, each client goes among its pool's workers."""
    # pool -> (its producers, its consumers)
    pools: dict[tuple[int, ...], tuple[list[ProducerSpec | ConsumerSpec], list[ProducerSpec | ConsumerSpec]]] = {}
    everyone: list[ProducerSpec | ConsumerSpec] = [*topology.producers, *topology.consumers]
    for spec in everyone:
        producers, consumers = pools.setdefault(tuple(pool_of(spec) if pool_of else range(workers)), ([], []))
        (consumers if isinstance(spec, ConsumerSpec) else producers).append(spec)
    placement = {}
    for pool, (producers, consumers) in pools.items():
        for specs, mine in zip((producers, consumers), split_roles(pool, len(producers), len(consumers)), strict=True):
            placement.update({client_id(spec): mine[n % len(mine)] for n, spec in enumerate(specs)})
    return placement


def split_roles(pool: Sequence[int], producers: int, consumers: int) -> tuple[Sequence[int], Sequence[int]]:
    """The workers of a pool for its producers and for its consumers: apart when the pool has two or
    more workers and both roles, in proportion to their counts, at least one each."""
    if len(pool) < 2 or not producers or not consumers:
        return pool, pool
    count = min(len(pool) - 1, max(1, round(len(pool) * producers / (producers + consumers))))
    return pool[:count], pool[count:]


def clients_by_worker(topology: Topology, placement: dict[str, int], workers: int) -> list[tuple[list, list]]:
    """The producers and consumers placed on each of the `workers`, in one pass over the clients (a
    thousand workers asked one by one cost a thousand passes)."""
    placed: list[tuple[list, list]] = [([], []) for _ in range(workers)]
    clients: list[ProducerSpec | ConsumerSpec] = [*topology.producers, *topology.consumers]
    for spec in clients:
        worker = placement.get(client_id(spec))
        if worker is not None and 0 <= worker < workers:
            placed[worker][0 if isinstance(spec, ProducerSpec) else 1].append(spec)
    return placed


def least_loaded(placement: dict[str, int], live: list[int], spec: ProducerSpec | ConsumerSpec) -> int:
    """The live worker with the fewest clients for a new client `spec`: among those hosting its role
    (producer or consumer) already, when any does (split_roles)."""
    role = client_id(spec)[0]  # "p" or "c"
    hosting = {worker for client, worker in placement.items() if client.startswith(role)}
    live = [w for w in live if w in hosting] or live
    load = dict.fromkeys(live, 0)
    for worker in placement.values():
        if worker in load:
            load[worker] += 1
    return min(live, key=lambda w: (load[w], w))


def replace_clients(topology: Topology, client_ids: list[str]) -> tuple[list[ProducerSpec], list[ConsumerSpec]]:
    """New clients for these (of a lost worker), doing the same job under fresh ids: a producer id
    keys its sequence numbers, so it is never reused."""
    gone = set(client_ids)
    producers = [
        ProducerSpec(topology.next_producer_id + n, p.topic, p.index_in_topic)
        for n, p in enumerate(p for p in topology.producers if client_id(p) in gone)
    ]
    consumers = [
        ConsumerSpec(topology.next_consumer_id + n, c.topic, c.group, c.kind)
        for n, c in enumerate(c for c in topology.consumers if client_id(c) in gone)
    ]
    topology.next_producer_id += len(producers)
    topology.next_consumer_id += len(consumers)
    topology.producers = [p for p in topology.producers if client_id(p) not in gone] + producers
    topology.consumers = [c for c in topology.consumers if client_id(c) not in gone] + consumers
    return producers, consumers


def resize(
    topology: Topology, producers_per_topic: int, consumers_per_group: int, kind: str
) -> tuple[list[ProducerSpec], list[ConsumerSpec], list[str]]:
    """Grow or shrink the run's clients to the new counts: returns (added producers, added consumers,
    ids of removed clients). New clients get fresh ids; the newest go first when shrinking."""
    added_producers: list[ProducerSpec] = []
    added_consumers: list[ConsumerSpec] = []
    removed: list[str] = []
    next_producer, next_consumer = topology.next_producer_id, topology.next_consumer_id
    for topic in topology.topics:
        mine = [p for p in topology.producers if p.topic == topic]
        for index in range(len(mine), producers_per_topic):
            spec = ProducerSpec(next_producer, topic, index)
            next_producer += 1
            added_producers.append(spec)
        removed += [f"p{p.producer_id}" for p in mine[producers_per_topic:]]
    for group, topic in topology.groups.items():
        members = [c for c in topology.consumers if c.group == group]
        for _ in range(len(members), consumers_per_group):
            added_consumers.append(ConsumerSpec(next_consumer, topic, group, kind))
            next_consumer += 1
        removed += [f"c{c.consumer_id}" for c in members[consumers_per_group:]]
    topology.next_producer_id, topology.next_consumer_id = next_producer, next_consumer
    gone = set(removed)
    topology.producers = [p for p in topology.producers if f"p{p.producer_id}" not in gone] + added_producers
    topology.consumers = [c for c in topology.consumers if f"c{c.consumer_id}" not in gone] + added_consumers
    return added_producers, added_consumers, removed
