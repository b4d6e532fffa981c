"""The messages between the coordinator and its workers. The protocol *is* these types: a local
worker gets them through a pipe, a remote one would get the same over the network."""

from dataclasses import dataclass, field

# A histogram on the wire: (bucket counts, total, min, max); see metrics/histogram.py.
# Histogram keys are (metric, partition). A latency of a record whose intended send time falls before
# the measured phase (in warm-up) goes under WARMUP_PREFIX + metric: the measured phase's percentiles
# cover exactly the records it produced, whenever they were consumed.
WARMUP_PREFIX = "warmup_"
HistogramWire = tuple[dict[int, int], int, float, float]


@dataclass(frozen=True)
class ProducerSpec:
    producer_id: int  # unique in the run; written into every message header
    topic: str
    index_in_topic: int  # PINNED_PARTITIONS pins producer i of a topic to partition i mod partitions


@dataclass(frozen=True)
class ConsumerSpec:
    consumer_id: int
    topic: str
    group: str
    kind: str  # SHARE_GROUP | CONSUMER_GROUP


@dataclass
class Assignment:
    """Everything a worker needs: its clients, the workload (as a dict), where the cluster is."""

    worker_index: int
    bootstrap_servers: str
    workload: dict
    producers: list[ProducerSpec]
    consumers: list[ConsumerSpec]
    total_producers: int  # the target rate is split evenly over every producer of the run
    delivery_count_limit: int  # a record released this often is archived by the broker
    log_file: str
    kafka_version: str  # the cluster's: clients with clientLibrary java run its Java clients


@dataclass
class ClientInterval:
    """What one client did in one interval (counts are deltas; client_stats is the latest snapshot)."""

    client_id: str
    role: str  # producer | consumer | share_consumer
    topic: str
    group: str = ""
    library: str = ""  # clientLibrary of the Kafka client: librdkafka | java
    # Which Kafka client of this load client ran (1, 2, ... as live changes rebuild it); 0 when the
    # interval saw a rebuild (two clients) or no client yet.
    generation: int = 0
    target_rate: float = 0.0
    sent: int = 0
    sent_bytes: int = 0
    acked: int = 0
    send_errors: int = 0
    next_sequence: int = 0  # producers: sequences 0..next_sequence-1 have been handed to the client
    failed_sequences: list[int] = field(default_factory=list)
    received: int = 0
    received_bytes: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    polls: int = 0
    max_poll_records: int = 0
    histograms: dict[tuple[str, int], HistogramWire] = field(default_factory=dict)  # (metric, partition)
    delivery_counts: dict[int, int] = field(default_factory=dict)
    settled: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # producer id -> sequence ranges
    client_stats: dict | None = None


@dataclass
class IntervalReport:
    worker_index: int
    end_time: float  # epoch seconds
    clients: list[ClientInterval]


# Coordinator -> worker commands: ("start_load", epoch), ("stop_producers",), ("close",)
# Worker -> coordinator: ("ready",), ("report", IntervalReport), ("producers_stopped",),
#                        ("closed",), ("failed", reason)
