"""`deadLetterQueue`: share groups on Kafka 4.4 or newer (KIP-1191) write the records they reject, or
that are released or time out on their last delivery, to a dead-letter topic instead of archiving
them in silence. The workload names the topic (or lets dimster name it), whether the broker copies the
record's key and value, and who creates the topic; the run applies it as two group configs."""

from pydantic import Field, field_validator

from dimster.workload.strict import Strict

TOPIC_NAME = "errors.deadletterqueue.topic.name"  # group config
COPY_RECORD = "errors.deadletterqueue.copy.record.enable"  # group config
TOPIC_ENABLE = "errors.deadletterqueue.group.enable"  # topic config of a topic dimster creates
AUTO_CREATE = "errors.deadletterqueue.auto.create.topics.enable"  # cluster config
PREFIX = "errors.deadletterqueue.topic.name.prefix"  # cluster config; the broker's default is `dlq.`
OLDEST_SHARE_VERSION = 2  # the share.version level that writes dead-letter records


class DeadLetterQueue(Strict):
    """`topic` defaults to the cluster's prefix (`dlq.`) and the run's name and tag, a topic of the run
    that dimster creates and deletes with its other topics. `createTopic: false` leaves the creation
    to the broker, which needs `errors.deadletterqueue.auto.create.topics.enable=true`."""

    topic: str | None = Field(None, min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    copy_record: bool = Field(False, alias="copyRecord")
    create_topic: bool = Field(True, alias="createTopic")
    enabled: bool = True  # live: false stops writing dead-letter records (the group's topic name is unset)

    @field_validator("topic")
    @classmethod
    def _not_internal(cls, value: str | None) -> str | None:
        if value is not None and value.startswith("__"):
            raise ValueError("a dead-letter topic's name must not start with '__' (Kafka's internal topics)")
        return value


def dead_letter_group_config(queue: DeadLetterQueue | None, topic: str | None) -> dict[str, str]:
    """The group configs that give a share group its dead-letter queue (none without one)."""
    if queue is None or topic is None:
        return {}
    configs = {COPY_RECORD: "true" if queue.copy_record else "false"}
    if queue.enabled:
        configs[TOPIC_NAME] = topic
    return configs
