"""Which clients a run has, what they are called, and which worker hosts each."""

from dataclasses import dataclass

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
    producers, consumers, groups = [], [], {}
    for t, topic in enumerate(topics):
        for i in range(workload.producers_per_topic):
            producers.append(ProducerSpec(len(producers), topic, i))
        for g in range(workload.groups_per_topic):
            group = f"{workload.name}-{run_tag}-t{t}-g{g}"
            groups[group] = topic
            for _ in range(workload.consumers_per_group):
                consumers.append(ConsumerSpec(len(consumers), topic, group, workload.consumer_type))
    return Topology(topics, groups, producers, consumers, len(producers), len(consumers))


def split_over_workers(items: list, workers: int) -> list[list]:
    """Round-robin, so each worker gets a similar mix of topics and groups."""
    return [items[w::workers] for w in range(workers)]


def resize(topology: Topology, producers_per_topic: int, consumers_per_group: int, kind: str):
    """Grow or shrink the run's clients to the new counts: returns (added producers, added consumers,
    ids of removed clients). New clients get fresh ids; the newest go first when shrinking."""
    added_producers, added_consumers, removed = [], [], []
    next_producer, next_consumer = topology.next_producer_id, topology.next_consumer_id
    for topic in topology.topics:
        mine = [p for p in topology.producers if p.topic == topic]
        for index in range(len(mine), producers_per_topic):
            spec = ProducerSpec(next_producer, topic, index)
            next_producer += 1
            added_producers.append(spec)
        removed += [f"p{p.producer_id}" for p in mine[producers_per_topic:]]
    for group, topic in topology.groups.items():
        mine = [c for c in topology.consumers if c.group == group]
        for _ in range(len(mine), consumers_per_group):
            added_consumers.append(ConsumerSpec(next_consumer, topic, group, kind))
            next_consumer += 1
        removed += [f"c{c.consumer_id}" for c in mine[consumers_per_group:]]
    topology.next_producer_id, topology.next_consumer_id = next_producer, next_consumer
    gone = set(removed)
    topology.producers = [p for p in topology.producers if f"p{p.producer_id}" not in gone] + added_producers
    topology.consumers = [c for c in topology.consumers if f"c{c.consumer_id}" not in gone] + added_consumers
    return added_producers, added_consumers, removed
