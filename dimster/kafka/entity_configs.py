"""A workload's `groupConfig` and `kafkaConfig.topicConfig`, judged by its Kafka version's own config
definitions (GroupConfig, LogConfig: names, types, ranges) before a run applies them."""

import json

from dimster.errors import DimsterError
from dimster.kafka.distribution import kafka_distribution
from dimster.kafka.helper import run_helper
from dimster.kafka.properties import property_text
from dimster.yamlfile import closest

KEYS = {"group": "groupConfig", "topic": "kafkaConfig.topicConfig"}  # a kind -> its workload key


def check_entity_configs(group: dict, topic: dict, source: str, kafka_version: str) -> None:
    """One error line for the first unknown name (with the closest known one) or refused value."""
    if not group and not topic:
        return
    asked = {
        kind: {name: property_text(value) for name, value in configs.items()}
        for kind, configs in (("group", group), ("topic", topic))
    }
    distribution = kafka_distribution(kafka_version)
    answer = run_helper(distribution, "entity-configs", json.dumps(asked))
    lines = answer.stdout.strip().splitlines()
    if answer.returncode != 0 or not lines:
        why = (answer.stderr.strip().splitlines() or ["no answer"])[-1]
        raise DimsterError(f"could not check {source}: groupConfig, topicConfig (Kafka {kafka_version}): {why}")
    verdicts = json.loads(lines[-1])
    for kind, key in KEYS.items():
        names, problem = verdicts[kind]["names"], verdicts[kind]["problem"]
        if names is None:  # this Kafka version has no such definitions
            continue
        for name in asked[kind]:
            if name not in names:
                raise DimsterError(f"{source}: {key}: unknown {kind} config '{name}'{closest(name, names)}")
        if problem:
            raise DimsterError(f"{source}: {key}: {problem}")
