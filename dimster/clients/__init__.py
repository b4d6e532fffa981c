"""The Kafka client libraries a worker drives, behind one small interface: librdkafka
(confluent-kafka) and Kafka's own Java clients (in-process through JPype), each one module
(`LibraryPlug`) registered in dimster/client_libraries.py. A driver owns one Kafka client; pacing,
payload headers, processing time, acknowledgement choices, sequence tracking and metrics stay in
`dimster.worker`'s load clients, the same for every library."""

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

import numpy as np

from dimster.client_libraries import LIBRARIES
from dimster.kafka.security import ClientSecurity
from dimster.workload.distributor import Choice
from dimster.workload.model import Workload

# Explicit acknowledgement outcomes, as the drivers receive them (one int8 per record).
ACCEPT, RELEASE, REJECT = 0, 1, 2
STATS_INTERVAL_S = 5.0  # how often a client's own statistics are taken


@dataclass
class Polled:
    """One poll's records as arrays, whatever the library."""

    partitions: np.ndarray  # int, one per record
    delivery_counts: np.ndarray  # int, one per record; 1 for consumer groups
    headers: bytes  # HEADER_SIZE bytes per record: the start of its value, zero-filled if shorter
    value_bytes: int  # sum of the value sizes
    offsets: np.ndarray | None = None  # int64, one per record
    intact: np.ndarray | None = None  # bool per record, when the consumer verifies checksums (correctness)
    waited_s: float = 0.0  # fetched ahead: how long the records waited, acquired, for the application

    @property
    def count(self) -> int:
        return len(self.partitions)


# The broker's answer to a share acknowledgement, per record (see Answers).
SETTLED, LOCK_LAPSED, REFUSED = 0, 1, 2
# What a renewal did to a record of the last poll (see ConsumerDriver.renew): 0 nothing (not held, or
# held but not back in flight yet), RENEWED, or RENEWAL_REFUSED (no longer held).
RENEWED, RENEWAL_REFUSED = 1, 2
KEY_PARTITION_SHIFT = 40  # a record's key: partition << 40 | offset (an offset stays below 2^40)


def record_keys(polled: Polled) -> np.ndarray:
    """One int64 per record of a poll, unique within a topic: partition and offset together."""
    assert polled.offsets is not None  # every driver gives its records' offsets
    return (polled.partitions.astype(np.int64) << KEY_PARTITION_SHIFT) | polled.offsets


@dataclass
class Answers:
    """The broker's answers to a share consumer's acknowledgements since the last look, as both
    libraries' acknowledgement-commit callbacks give them: per record acknowledged, its key
    (record_keys) and SETTLED (the outcome it was acknowledged with took effect), LOCK_LAPSED (its
    acquisition lock had run out) or REFUSED (for another reason). Renewals are not answers."""

    keys: np.ndarray  # int64
    status: np.ndarray  # int8

    @staticmethod
    def none() -> "Answers":
        return Answers(np.empty(0, np.int64), np.empty(0, np.int8))


@dataclass
class Halted:
    """What a share consumer that fetched ahead (ConsumerDriver.fetch_ahead) held when it stopped."""

    unseen: Polled | None = None  # fetched and never handed over: not accepted
    last_accepted: bool = False  # the last poll handed over went with a later fetch, which accepted it


class ProducerDriver(Protocol):
    def send(self, first_sequence: int, intended: list[float], choices: list[Choice]) -> tuple[np.ndarray, int]:
        """Hand records first_sequence.. over to the client, one per intended send time (epoch s) and
        (key, partition) choice; returns when each was handed over (epoch s) and the bytes handed over."""

    def serve(self) -> None:
        """Give the client a chance to report acknowledgements and statistics."""

    def take_acks(self) -> tuple[np.ndarray, list[int]]:
        """Since the last call: acknowledgement latencies (µs) and sequences that failed."""

    def close(self, timeout: float) -> int:
        """Deliver what is buffered (up to `timeout` s) and close; returns how many records were left."""


REBALANCE_KINDS = ("assigned", "revoked", "lost")  # the rebalance callbacks of a consumer-group member
Rebalance = tuple[float, str, int]  # (epoch s on this host's clock, one of REBALANCE_KINDS, partitions)


class ConsumerDriver(Protocol):
    def subscribe(self, topic: str) -> None: ...

    def take_rebalances(self) -> list[Rebalance]:
        """Consumer groups: the rebalance callbacks since the last call (they run inside poll and close)."""

    def assigned_partitions(self) -> list[int]:
        """Consumer groups: the partitions assigned to this member now, in order."""

    def pause_only(self, paused: set[int]) -> None:
        """Consumer groups: pause these assigned partitions and resume every other one."""

    def poll(self, timeout: float) -> Polled | None:
        """Records of one poll, or None when there were none."""

    def acknowledge(self, outcomes: np.ndarray) -> None:
        """Explicit share acknowledgement of every record of the last poll (ACCEPT, RELEASE, REJECT)."""

    def take_answers(self) -> Answers:
        """Share groups: the broker's answers to acknowledgements since the last call (those that
        poll, renew or close dispatched)."""

    def lock_timeout_ms(self) -> float | None:
        """Share groups: the acquisition lock time-out the broker reported, when the library tells."""

    def renew(self, timeout: float) -> np.ndarray:
        """Share groups, explicit mode (KIP-1222): renew the locks of the last poll's records (within
        `timeout` s), as the broker answers per partition; per record 0, RENEWED or RENEWAL_REFUSED."""

    def fetch_ahead(self, on: bool) -> None:
        """Share groups, implicit mode with no processing: whether the next poll is fetched while the
        application handles the last one (its fetch accepts the last one's records as soon as they were
        handed over). librdkafka's share consumer always fetches ahead on threads of its own."""

    def halt(self) -> Halted:
        """Stop fetching ahead, before the application leaves its poll loop: what it held."""

    def close(self) -> None:
        """Settle the last poll (share groups) and leave the group."""


# A driver's constructors. on_stats takes the client's statistics as metrics/client_stats.py's COLUMNS.
ProducerFactory = Callable[..., ProducerDriver]  # (properties, client_id, topic, producer_id, bodies, on_stats)
ConsumerFactory = Callable[..., ConsumerDriver]  # (properties, client_id, share, on_stats, verify=False)


class LibraryPlug(Protocol):
    """What the module of a client library provides (the module itself is the plug)."""

    PRODUCER: ProducerFactory
    CONSUMER: ConsumerFactory

    def client_security(self, security: ClientSecurity) -> dict[str, str]:
        """The cluster's client security (librdkafka's names, kafka/security.py) in this library's names."""

    def check(self, workload: Workload, roles: list[str], kafka_version: str) -> Iterator[str]:
        """The problems this library finds in the properties of `roles` (the run's roles it runs), one
        line each, before a run starts or changes."""

    def prepare_process(self, log_file: Path, kafka_version: str, clients_version: str) -> None:
        """Ready a worker process whose clients run this library, before the first one is built (its
        own log beside the worker's `log_file`)."""


def library(name: str) -> LibraryPlug:
    """The plug of the client library `name` (a key of LIBRARIES), imported on first use."""
    return cast(LibraryPlug, importlib.import_module(LIBRARIES[name]))
