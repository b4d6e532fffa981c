"""A warm-up summary: a small made-up run, written by dimster's own metrics writer into every table
of a bundle, summarized on dimster's Spark server while a real run loads. A server's first summary
loads and compiles Spark's code for each kind of query (some 12 s more than its next one); after this
one, the run's own summary finds the server warm.

SparkService.start_ahead starts it, once the server it started listens, as a process of its own at the
server's low priority (its Python never competes with the run's for a core or the GIL), and the run's
end ends it if it is still going: `python -m dimster.pipeline.warm_up sc://127.0.0.1:PORT`. It uses
that server only, never starts one, and leaves nothing behind (its bundle is a temporary folder)."""

import sys
import tempfile
import time
from pathlib import Path
from typing import cast

from dimster.kafka.groups import LagSample
from dimster.metrics.histogram import Histogram
from dimster.metrics.schema import from_source
from dimster.pipeline.share_meters import ACKS
from dimster.results.metrics_writer import MetricsWriter
from dimster.results.records import RunJson, write_run_json
from dimster.worker.client_columns import ClientColumns
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import ClientInterval, worker_report

START = 1_800_000_000.0
SECONDS, RATE, TOPIC, GROUP = 6, 200, "warm-up", "warm-up-group"


def write_made_up_run(folder: Path) -> None:
    """A completed share-group run of SECONDS measured seconds: one producer and two consumers at RATE
    msg/s, their statistics, the worker's load, one broker's scrapes and the group's lag each second."""
    writer = MetricsWriter(folder / "metrics", START)
    for second in range(1, SECONDS + 1):
        at = START + second
        latencies = HistogramColumns.gather(
            [
                {("publish", -1): _histogram(range(500, 5000, 25)), ("publish_delay", -1): _histogram(range(200))},
                *({("e2e", c): _histogram(range(1000, 9000, 80))} for c in range(2)),
            ]
        )
        report = worker_report(
            0, at, ClientColumns.gather(_clients(second)), 0.2, 10**8, threads=9, cores=2, histograms=latencies
        )
        writer.add(report, "measure")
        writer.add_broker_samples(at, 1, _broker_samples(second), "measure")
        writer.add_group_lag(
            LagSample(at, {GROUP: {0: (second * RATE, 5), 1: (second * RATE, 3)}}), {GROUP: 4}, "measure"
        )
    writer.flush()
    run = {"run_id": "warm-up", "status": "completed", "load_started": START, "topics": [TOPIC], "groups": {GROUP: {}}}
    write_run_json(
        folder, cast(RunJson, {**run, "totals": {"sent": SECONDS * RATE, "lost": 0}})
    )  # what a summary reads


def _histogram(values: range) -> tuple:
    histogram = Histogram()
    histogram.record_many([float(v) for v in values])
    return histogram.to_wire()


def _clients(second: int) -> list[ClientInterval]:
    """The producer, then the two consumers (whose histograms write_made_up_run adds)."""
    stats = {m.name: float(second * 40 if m.kind == "counter" else 2) for m in from_source("client_stats")}
    producer = ClientInterval(
        client_id="p0", role="producer", topic=TOPIC, target_rate=RATE, sent=RATE, acked=RATE,
        sent_bytes=RATE * 100, next_sequence=second * RATE, client_stats=stats,
    )  # fmt: skip
    consumers = [
        ClientInterval(
            client_id=f"c{c}", role="share_consumer", topic=TOPIC, group=GROUP, received=RATE // 2,
            received_bytes=RATE * 50, accepted=RATE // 2, polls=10, max_poll_records=20, client_stats=stats,
            delivery_counts={1: RATE // 2 - 1, 2: 1},
        )
        for c in range(2)
    ]  # fmt: skip
    return [producer, *consumers]


def _broker_samples(second: int) -> list[tuple[str, dict[str, str], float]]:
    times = [
        ("kafka_network_request_totaltime_seconds", {"request": request, "percentile": p}, 0.002 * (i + 1))
        for request in ("Produce", "ShareFetch")
        for i, p in enumerate(("0.50", "0.99", "0.999"))
    ]
    counters = [
        ("kafka_network_requests_total", {"request": "Produce", "version": "11"}, 40.0 * second),
        ("kafka_network_requests_total", {"request": "ShareFetch", "version": "1"}, 20.0 * second),
        ("kafka_server_topics_bytesin_total", {}, 20_000.0 * second),
        ("kafka_server_topics_bytesout_total", {}, 20_000.0 * second),
        ("kafka_server_topic_bytesin_total", {"topic": TOPIC}, 20_000.0 * second),
        (ACKS, {"ack_type": "ACCEPT"}, float(RATE * second)),
        ("kafka_server_share_dead_letter_records_total", {"group": GROUP}, float(second)),
    ]
    levels = [
        ("kafka_server_purgatory_purgatorysize", {"operation": "Produce"}, 1.0),
        ("kafka_server_share_partition_in_flight_messages", {"group": GROUP, "topic": TOPIC, "partition": "0"}, 8.0),
    ]
    return [*times, *counters, *levels]


def main(argv: list[str]) -> int:
    """Summarize a made-up run on the Connect server at argv[0]; 0 whether or not Spark took it (a
    warm-up that failed costs the next summary its time, nothing else)."""
    from dimster.pipeline.summary import summarize

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dimster-warm-up-") as scratch:
        folder = Path(scratch)
        write_made_up_run(folder)
        try:
            summarize(folder, argv[0])
        except Exception as e:  # said in the warm-up's log, never to the run  # noqa: BLE001
            print(f"warm-up summary failed: {e}", file=sys.stderr)
            return 0
    print(f"warm-up summary done in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
