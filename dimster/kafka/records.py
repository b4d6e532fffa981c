"""Reading a topic's records by assignment, outside any run's groups: what a dead-letter topic holds,
and which of dimster's records lie between two offsets of a partition."""

from collections.abc import Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from dimster.clock import Deadline
from dimster.errors import DimsterError
from dimster.kafka.admin import _quiet
from dimster.kafka.security import ClientSecurity
from dimster.workload.payload import unpack_header

TIMEOUT = 15.0
READ_SECONDS = 60.0  # for one read to reach the ends it was asked for


def reader(bootstrap: str, security: ClientSecurity) -> Consumer:
    """A consumer that reads by assignment and commits nothing."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "dimster-record-reader",  # never joined: partitions are assigned
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "logger": _quiet,
            **(security or {}),
        }
    )


def partitions_of(consumer: Consumer, topic: str) -> list[int]:
    """The topic's partitions; none when it does not exist (yet)."""
    described = consumer.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
    if described is None or described.error is not None:
        return []
    return sorted(described.partitions)


def every_record(consumer: Consumer, topic: str, partitions: list[int]) -> Iterator[Message]:
    """Every record the partitions hold now, up to each one's end."""
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)[1] for p in partitions}
    spans = {p: (OFFSET_BEGINNING, end) for p, end in ends.items() if end > 0}
    yield from records_between(consumer, topic, spans)


def records_between(consumer: Consumer, topic: str, spans: dict[int, tuple[int, int]]) -> Iterator[Message]:
    """The records of each partition from its first offset up to, not including, its end offset (a
    partition is done when the consumer's position reaches its end: transaction markers are skipped)."""
    open_partitions = {p for p, (first, end) in spans.items() if first < end}
    consumer.assign([TopicPartition(topic, p, spans[p][0]) for p in open_partitions])
    deadline = Deadline(READ_SECONDS)
    while open_partitions and not deadline.passed():
        for message in fetched(consumer):
            partition, offset = message.partition() or 0, message.offset() or 0
            if message.topic() == topic and partition in open_partitions and offset < spans[partition][1]:
                yield message
        positions = consumer.position([TopicPartition(topic, p) for p in open_partitions])
        open_partitions -= {tp.partition for tp in positions if tp.offset >= spans[tp.partition][1]}
    if open_partitions:
        raise DimsterError(f"{topic} could not be read to the offsets asked within {READ_SECONDS:.0f} s")


def records_until(consumer: Consumer, last: int) -> Iterator[Message]:
    """The assigned partition's records up to offset `last`."""
    deadline = Deadline(READ_SECONDS)
    while not deadline.passed():
        for message in fetched(consumer):
            yield message
            if (message.offset() or 0) >= last:
                return


def fetched(consumer: Consumer) -> Iterator[Message]:
    """One fetch's records: an error other than a partition's end is raised."""
    for message in consumer.consume(10_000, 1.0):
        error = message.error()
        if error is None:
            yield message
        elif error.code() != KafkaError._PARTITION_EOF:
            raise KafkaException(error)


def identities_between(
    bootstrap: str, security: ClientSecurity, topic: str, spans: dict[int, tuple[int, int]]
) -> Iterator[tuple[int, int]]:
    """(producer id, sequence) of each record dimster wrote between the spans' offsets."""
    consumer = reader(bootstrap, security)
    try:
        for message in records_between(consumer, topic, spans):
            if header := unpack_header(message.value()):
                yield header[:2]
    finally:
        consumer.close()
