"""The measured phase, defined once: a record's latency counts for it when the record was intended to
be sent in it, whenever it was consumed; warm-up records go under their own metric names. And what
the end of a run counts as lost: records a group never settled and can no longer consume."""

import threading
import time

import numpy as np
import pytest

from dimster.clients import Polled
from dimster.coordinator.account.aggregate import RunAggregate
from dimster.metrics.histogram import Histogram
from dimster.worker.clients import ConsumerClient
from dimster.worker.histogram_columns import ClientHistograms, HistogramColumns
from dimster.worker.protocol import WARMUP_PREFIX, ClientInterval, ConsumerSpec, worker_report
from dimster.workload.model import Workload
from dimster.workload.payload import pack_header

pytestmark = pytest.mark.unit


def poll_of(intended_ns: list[int]) -> Polled:
    return Polled(
        partitions=np.zeros(len(intended_ns), dtype=np.int32),
        delivery_counts=np.ones(len(intended_ns), dtype=np.int32),
        headers=b"".join(pack_header(1, s, t) for s, t in enumerate(intended_ns)),
        value_bytes=0,
        offsets=np.arange(len(intended_ns), dtype=np.int64),
    )


def latency_totals(taken: tuple[ClientInterval, ClientHistograms]) -> dict[str, int]:
    return {metric: Histogram.from_wire(wire).total for (metric, _), wire in taken[1].items()}


def test_e2e_latency_goes_to_the_phase_the_record_was_intended_for():
    workload = Workload.model_validate({"name": "w", "consumerType": "SHARE_GROUP"})
    client = ConsumerClient(ConsumerSpec(0, "t", "g", "SHARE_GROUP"), workload, "127.0.0.1:1", 5)
    now = time.time()
    client.measure_from = now - 1.0
    # three records from warm-up (2 s ago), two from the measured phase (0.5 s ago), one poll
    client._record(poll_of([int((now - 2.0) * 1e9)] * 3 + [int((now - 0.5) * 1e9)] * 2), None)
    taken = client.take_interval()
    interval = taken[0]
    totals = latency_totals(taken)
    assert totals == {"e2e": 2, WARMUP_PREFIX + "e2e": 3}
    assert interval.received == 5  # counts are not split: only latencies are


def test_a_record_that_arrives_before_the_worker_read_load_start_waits_for_the_measured_phase():
    """On a busy host the consumer can hold the run's first records before its worker has read when
    load started: the record is judged once that is known, a warm-up record as warm-up."""
    workload = Workload.model_validate({"name": "w", "consumerType": "SHARE_GROUP"})
    client = ConsumerClient(ConsumerSpec(0, "t", "g", "SHARE_GROUP"), workload, "127.0.0.1:1", 5)
    now = time.time()
    told = threading.Timer(0.3, lambda: setattr(client, "measure_from", now + 10.0))
    told.start()
    client._record(poll_of([int(now * 1e9)] * 2), None)
    told.join()
    totals = latency_totals(client.take_interval())
    assert totals == {WARMUP_PREFIX + "e2e": 2}


def test_a_stopping_consumer_does_not_wait_for_the_measured_phase():
    workload = Workload.model_validate({"name": "w", "consumerType": "SHARE_GROUP"})
    client = ConsumerClient(ConsumerSpec(0, "t", "g", "SHARE_GROUP"), workload, "127.0.0.1:1", 5)
    client.stopping.set()
    client._record(poll_of([int(time.time() * 1e9)]), None)  # returns: load never started here
    totals = latency_totals(client.take_interval())
    assert totals == {WARMUP_PREFIX + "e2e": 1}


def test_console_window_shows_warmup_and_measured_latencies_together():
    aggregate = RunAggregate({"g": "t"})
    warm, measured = Histogram(), Histogram()
    warm.record_array(np.array([1000.0] * 3))
    measured.record_array(np.array([2000.0] * 2))
    interval = ClientInterval("c0", "share_consumer", "t", "g", received=5)
    latencies = {(WARMUP_PREFIX + "e2e", 0): warm.to_wire(), ("e2e", 0): measured.to_wire()}
    aggregate.add(worker_report(0, time.time(), [interval], histograms=HistogramColumns.gather([latencies])))
    assert aggregate.window.e2e.total == 5


def producer_report(next_sequence: int, acked: int) -> ClientInterval:
    return ClientInterval("p0", "producer", "t", next_sequence=next_sequence, acked=acked, sent=next_sequence)


def test_records_still_in_reach_of_the_group_are_unconsumed_not_lost():
    aggregate = RunAggregate({"g": "t"})
    consumed = ClientInterval("c0", "share_consumer", "t", "g", received=60, settled={0: [(0, 59)]})
    aggregate.add(worker_report(0, time.time(), [producer_report(100, 100), consumed]))
    assert aggregate.missing_by_group() == {"g": 40}
    assert aggregate.lost() == 40  # nothing known about the group's position: every missing record
    assert aggregate.lost({"g": 40}) == 0  # all 40 are still in the topic for the group
    assert aggregate.lost({"g": 30}) == 10  # 10 of them are gone for good


def test_lost_is_counted_per_group():
    aggregate = RunAggregate({"g1": "t", "g2": "t"})
    first = ClientInterval("c0", "consumer", "t", "g1", received=100, settled={0: [(0, 99)]})
    second = ClientInterval("c1", "consumer", "t", "g2", received=50, settled={0: [(0, 49)]})
    aggregate.add(worker_report(0, time.time(), [producer_report(100, 100), first, second]))
    # g1's unconsumed records cannot excuse g2's missing ones
    assert aggregate.lost({"g1": 50, "g2": 0}) == 50
    assert aggregate.lost({"g1": 0, "g2": 50}) == 0


def test_reports_from_before_load_start_do_not_dilute_the_first_rates():
    """Workers report while consumers join; the first report after load start covers from load start."""
    aggregate = RunAggregate({"g": "t"})
    for second in range(1, 6):  # five idle seconds while the group forms
        aggregate.add(worker_report(0, 100.0 + second, [producer_report(0, 0)]))
    aggregate.load_started = 105.5
    aggregate.restart_rates()
    aggregate.take_window()
    loaded = ClientInterval("p0", "producer", "t", target_rate=1000, sent=500, acked=500, next_sequence=500)
    aggregate.add(worker_report(0, 106.0, [loaded]))
    assert aggregate.take_window()["pubRate"] == pytest.approx(1000)
    assert aggregate.recent_rates()["targetRate"] == pytest.approx(1000)


def test_records_in_flight_on_a_lost_producer_are_not_lost():
    aggregate = RunAggregate({"g": "t"})
    # 100 handed over, 90 acknowledged when its worker was last heard; consumers got 88 of the acked
    aggregate.add(worker_report(0, time.time(), [producer_report(100, 90)]))
    consumed = ClientInterval("c0", "share_consumer", "t", "g", received=88, settled={0: [(0, 87)]})
    aggregate.add(worker_report(1, time.time(), [consumed]))
    assert aggregate.lost() == 12
    aggregate.lost_producers.add(0)
    assert aggregate.lost() == 2  # the 10 in flight may never have reached the broker


def test_a_failed_send_is_not_missing_and_one_settled_anyway_counts_as_settled():
    """A producer's failed sends (kept as ranges, repeats once) are not records the group missed; one
    whose send failed yet arrived (a timed-out request the broker had written) counts as settled."""
    aggregate = RunAggregate({"g": "t"})
    producer = producer_report(100, 89)
    producer.failed_sequences = [*range(10, 20), 50, 50]
    settled = {0: [(0, 9), (15, 15), (20, 49), (51, 89)]}
    consumer = ClientInterval("c0", "share_consumer", "t", "g", received=80, settled=settled)
    aggregate.add(worker_report(0, time.time(), [producer, consumer]))
    assert aggregate.failed[0].count() == 11
    assert aggregate.missing_by_group() == {"g": 10}  # 90-99: 10-14, 16-19 and 50 failed, 15 arrived
