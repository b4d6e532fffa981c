"""The run's dead-letter topic (KIP-1191): counted while load runs, and read at the end, when every
record a share group rejected, or that was archived on its last delivery, must be found there once.
The broker writes dead-letter records at least once and without idempotence, after the record's
acknowledgement: the end waits a while for the last of them."""

import threading
import time
from collections import Counter
from collections.abc import Set

from confluent_kafka import KafkaException

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.control.run_log import RunLog
from dimster.coordinator.observers.run_kafka import RunKafka
from dimster.errors import DimsterError
from dimster.kafka.admin import records_in_log
from dimster.kafka.dead_letters import DeadLetters, Source, identities, read_sources

COUNT_EVERY = 5.0  # seconds between live counts of the topic's records
SETTLE_SECONDS = 30.0  # the broker's dead-letter writes retry with a back-off of 1 s and more
LOOK_AGAIN_SECONDS = 1.0
MAX_STORIES = 200  # corrected records told one by one in events.jsonl (the count is told whole)
OUTCOMES = ("rejected", "archived")  # a share group's records that go to its dead-letter topic


def expected_by_group(a: RunAggregate) -> dict[str, int]:
    return {g: sum(a.outcomes.count(o, g) for o in OUTCOMES) for g in a.groups}


def match(
    a: RunAggregate, letters: DeadLetters, known: dict[Source, tuple[int, int]], states: Set[bool] = frozenset({True})
) -> dict[str, dict[str, int | None]]:
    """Per group: the run's records found in the dead-letter topic (each once), the rejected or archived
    ones not found there, the extra copies, and records found that the run settled otherwise (or whose
    source could not be read). `states`: the queue's `enabled` as the run had it: never enabled, none
    is expected there; switched live, which records were meant for it is not known (missing: None)."""
    copies: dict[str, Counter[tuple[int, int]]] = {g: Counter() for g in a.groups}
    unread: dict[str, Counter[Source]] = {g: Counter() for g in a.groups}  # sources not found in the log
    for source, n in letters.found.items():
        identity = known.get(source)
        if identity is None:
            unread[source[0]][source] += n
        else:
            copies[source[0]][identity] += n
    enabled, never = states == {True}, True not in states
    counts: dict[str, dict[str, int | None]] = {}
    for group, expected in expected_by_group(a).items():
        found, unread_here = copies[group], unread[group]
        matched = sum(
            any(a.outcomes.holds(o, group, producer, sequence) for o in OUTCOMES) for producer, sequence in found
        )
        distinct = len(found) + len(unread_here)
        counts[group] = {
            "dead_lettered": distinct,
            "dead_letter_missing": expected - matched if enabled else (0 if never else None),
            "dead_letter_duplicates": sum(found.values()) + sum(unread_here.values()) - distinct,
            "dead_letter_unexpected": distinct if never else distinct - matched,
        }
    return counts


def letters_by_group(letters: DeadLetters, known: dict[Source, tuple[int, int]]) -> dict[str, dict]:
    """Per group: (producer id, sequence) -> the broker's cause, of every record found in the topic."""
    by_group: dict[str, dict] = {}
    for source, identity in known.items():
        by_group.setdefault(source[0], {})[identity] = letters.causes.get(source, "archived")
    return by_group


class DeadLetterWatch:
    """The dead-letter topic's records as the run goes (the aggregate's `dead_lettered`), on a thread of
    its own; `finish` replaces the count by the end's matching."""

    def __init__(self, kafka: RunKafka, aggregate: RunAggregate, log: RunLog):
        self.kafka, self.aggregate, self.log = kafka, aggregate, log
        assert kafka.dead_letter_topic is not None  # made only for a run that has one
        self.topic = kafka.dead_letter_topic
        self.partitions = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._count, name="dead-letter-count", daemon=True)
        aggregate.dead_lettered = 0

    def start(self) -> None:
        self.thread.start()

    def records(self) -> int | None:
        """The topic's records now (None before the broker has created a topic it creates). Its
        partitions are asked for until there are some, then kept: a topic does not lose any."""
        if not self.partitions:
            self.partitions = self.kafka.dead_letter_partitions()
            if not self.partitions:
                return None
        kafka = self.kafka
        return records_in_log(kafka.bootstrap, {self.topic: self.partitions}, security=kafka.security)[self.topic]

    def _count(self) -> None:
        while not self.stopped.wait(COUNT_EVERY):
            try:
                if (records := self.records()) is not None:
                    self.aggregate.dead_lettered = records
            except DimsterError:
                pass  # a count missed; the end reads the topic whole

    def _rule(self, letters: DeadLetters, known: dict[Source, tuple[int, int]]) -> None:
        """The topic as the referee of the account (share_outcomes.ShareOutcomes.rule): for each group
        whose every dead-letter record could be read back to its producer and sequence. Each record
        dimster had counted otherwise is an event with its story."""
        a, by_group = self.aggregate, letters_by_group(letters, known)
        unread = {source[0] for source in letters.found if source not in known}
        for group in a.groups:
            if group in unread:
                self.log.event("dead_letters_not_ruled", group=group, reason="a dead-letter record's source is unread")
                continue
            settled = {producer: ranges for (g, producer), ranges in a.settled.items() if g == group}
            ruling = a.outcomes.rule(group, by_group.get(group, {}), settled)
            for story in ruling.corrected[:MAX_STORIES]:
                self.log.event("dead_letter_corrected", **story)
            if ruling.corrected:
                self.log.tell(
                    "dead_letters_ruled",
                    f"-- the dead-letter topic corrected {len(ruling.corrected):,} record(s) of group {group}: "
                    "counted by the broker's word (events.jsonl, dead_letter_corrected)",
                    group=group, corrected=len(ruling.corrected), in_doubt=len(ruling.unconfirmed),
                )  # fmt: skip

    def finish(self) -> None:
        """Once the consumers have closed: wait until the topic holds as many records as expected (the
        broker's last writes retry), for SETTLE_SECONDS at most, read it, and set the aggregate's
        dead-letter figures."""
        self.stopped.set()
        a, started = self.aggregate, time.monotonic()
        states = self.kafka.dead_letter_states
        expected = sum(expected_by_group(a).values()) if states == {True} else 0
        try:  # the topic's end offsets until they hold what is expected, then the topic read once
            while (self.records() or 0) < expected and time.monotonic() < started + SETTLE_SECONDS:
                time.sleep(LOOK_AGAIN_SECONDS)
            letters = read_sources(self.kafka.bootstrap, self.kafka.security, self.topic, set(a.groups))
            unread = set(letters.found) - set(letters.copied)
            known = {**letters.copied, **identities(self.kafka.bootstrap, self.kafka.security, unread)}
        except (DimsterError, KafkaException) as e:  # the cluster's answer: the run's other numbers stand
            self.log.tell("dead_letters_unread", f"-- the dead-letter topic could not be read: {e}", reason=str(e))
            a.dead_lettered = None
            return
        a.outcomes.restore()  # every record the run rejected or archived, to hold against the topic's
        a.dead_letter_by_group = match(a, letters, known, states)
        for field in ("dead_lettered", "dead_letter_missing", "dead_letter_duplicates"):
            values = [g[field] for g in a.dead_letter_by_group.values()]
            setattr(a, field, None if None in values else sum(v or 0 for v in values))
        unexpected = sum(g["dead_letter_unexpected"] or 0 for g in a.dead_letter_by_group.values())
        if states == {True}:
            self._rule(letters, known)
        self.log.event(
            "dead_letters_read",
            topic=self.topic,
            expected=expected,
            dead_lettered=a.dead_lettered,
            dead_letter_missing=a.dead_letter_missing,
            dead_letter_duplicates=a.dead_letter_duplicates,
            dead_letter_unexpected=unexpected,
            other_groups=letters.others,
            seconds=round(time.monotonic() - started, 2),
        )
