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


def build_topology(workload: Workload, run_tag: str) -> Topology:
    topics = [f"{workload.name}-{run_tag}-{t}" for t in range(workload.topics)]
    producers, consumers, groups = [], [], {}
    for t, topic in enumerate(topics):
        for i in range(workload.producers_per_topic):
            producers.append(ProducerSpec(len(producers), topic, i, workload.partitions_per_topic))
        for g in range(workload.groups_per_topic):
            group = f"{workload.name}-{run_tag}-t{t}-g{g}"
            groups[group] = topic
            for _ in range(workload.consumers_per_group):
                consumers.append(ConsumerSpec(len(consumers), topic, group, workload.consumer_type))
    return Topology(topics, groups, producers, consumers)


def split_over_workers(items: list, workers: int) -> list[list]:
    """Round-robin, so each worker gets a similar mix of topics and groups."""
    return [items[w::workers] for w in range(workers)]
