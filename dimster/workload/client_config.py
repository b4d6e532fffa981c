"""Checks a workload's Kafka client properties with librdkafka itself, before anything starts."""

import logging

from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer

from dimster.errors import DimsterError
from dimster.workload.model import Workload

_quiet = logging.getLogger("dimster.client-check")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False

# Java-client settings librdkafka lacks, and how dimster treats them.
UNSUPPORTED = {
    ("shareConsumerConfig", "share.acquire.mode"): (
        "is not supported by librdkafka's share consumer (confluent-kafka 2.16 rejects it); "
        "it needs Kafka's Java client, which dimster does not drive yet"
    ),
}
EMULATED = {("consumerConfig", "max.poll.records")}  # applied by dimster as the consume() batch size


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def check_client_configs(workload: Workload, source: str) -> None:
    kc = workload.kafka_config
    sections = (
        ("producerConfig", kc.producer_config, Producer, {}),
        ("consumerConfig", kc.consumer_config, Consumer, {"group.id": "dimster-check"}),
        ("shareConsumerConfig", kc.share_consumer_config, ShareConsumer, {"group.id": "dimster-check"}),
    )
    for section, properties, client_class, extra in sections:
        for key in properties:
            if (section, key) in UNSUPPORTED:
                raise DimsterError(f"{source}: kafkaConfig.{section}.{key} {UNSUPPORTED[(section, key)]}")
        config = {
            **{k: _text(v) for k, v in kc.common_config.items()},
            **{k: _text(v) for k, v in properties.items() if (section, k) not in EMULATED},
            **extra,
            "logger": _quiet,
        }
        try:
            client = client_class(config)
        except KafkaException as e:
            where = "commonConfig" if _blames_common(e, kc.common_config) else section
            raise DimsterError(f"{source}: kafkaConfig.{where}: {e.args[0].str()}") from None
        if client_class is Producer:
            client.flush(0)
        else:
            client.close()


def _blames_common(error: KafkaException, common: dict) -> bool:
    text = error.args[0].str()
    return any(f'"{key}"' in text for key in common)
