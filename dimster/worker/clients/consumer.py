"""A consumer load client, of a consumer group or a share group: polls, simulates processing,
chooses acknowledgements, renews record locks, crashes on request, and accounts for every record
it receives (settled sequences, delivery counts, end-to-end latency). A share-group record is
settled when the broker answers its acknowledgement (unsettled.py), a consumer-group record when it
is received."""

import logging
import random
import threading
import time

import numpy as np

from dimster.clients import (
    ACCEPT,
    REFUSED,
    REJECT,
    RELEASE,
    RENEWAL_REFUSED,
    RENEWED,
    Answers,
    ConsumerDriver,
    Halted,
    Polled,
    record_keys,
)
from dimster.clients.jvm import detach_thread
from dimster.metrics.sequences import to_ranges
from dimster.worker import clock
from dimster.worker.clients.drivers import consumer_driver
from dimster.worker.clients.load_client import LoadClient, distinct
from dimster.worker.clients.redeliveries import CrashWatch
from dimster.worker.clients.unsettled import Unsettled, archive, count_answered, receive, rows_of, settle
from dimster.worker.histogram_columns import ClientHistograms
from dimster.worker.protocol import WARMUP_PREFIX, ClientInterval, ConsumerSpec
from dimster.workload.flow_control import partitions_to_pause
from dimster.workload.model import DEFAULT_LOCK_MS, LOCK_DURATION, Workload
from dimster.workload.payload import unpack_headers
from dimster.workload.processing import makespan_ms, processing_times_ms

log = logging.getLogger("dimster.worker")
MIN_LOCK_S = 1.0  # the shortest acquisition lock a broker allows (group.share.min.record.lock.duration.ms)
RENEW_TIMEOUT_MIN_S = 0.1  # a renewal started late still gets this long to be answered
CLOSE_AFTER_LOCK_S = 5.0  # a crashed client is closed this long after its records' locks ran out


class ConsumerClient(LoadClient):
    """A consumer-group member (CONSUMER_GROUP) or a share-group member (SHARE_GROUP)."""

    def __init__(
        self,
        spec: ConsumerSpec,
        workload: Workload,
        bootstrap: str,
        delivery_count_limit: int,
        record_lock_ms: int = DEFAULT_LOCK_MS,
        security: dict | None = None,
    ):
        self.role = "share_consumer" if spec.kind == "SHARE_GROUP" else "consumer"
        self.spec = spec
        super().__init__(f"c{spec.consumer_id}", spec.topic, spec.group, workload.client_library.of(self.role))
        self.workload = workload
        self.bootstrap = bootstrap
        self.security = security or {}  # the cluster's client security (kafka/security.py)
        self.broker_delivery_count_limit = delivery_count_limit
        self.record_lock_ms = record_lock_ms  # the group's at start (the broker's default unless set)
        self.rng = random.Random()
        self.flow_polls = 0  # polls under flowControl, for its rotating pattern
        self.draws = np.random.default_rng()
        self.subscribed = threading.Event()
        self.polling = threading.Event()  # in its poll loop: a poll may take records
        self.crashing = threading.Event()  # set by crash(): stop dead at the next chance
        self.burials: list[tuple[threading.Thread, float]] = []  # (closes a crashed client, its lock s)
        self.unsettled = Unsettled()  # share groups: records whose acknowledgement is unanswered
        self.crash_watch = CrashWatch()  # records a crashed consumer of the group held, under lock
        # correctness, consumer groups: (partition, producer id) -> (offset, sequence) of the last record
        self.last_seen: dict[tuple[int, int], tuple[int, int]] = {}

    def take_interval(self) -> tuple[ClientInterval, ClientHistograms]:
        interval, histograms = super().take_interval()
        # collected as sequence numbers per producer (see _record), sent as ranges
        for name in ("settled", "settled_rejected", "settled_archived", "received_again", "in_doubt", "crash_held"):
            by_producer = getattr(interval, name)
            setattr(interval, name, {key: to_ranges(sequences) for key, sequences in by_producer.items()})
        return interval, histograms

    @property
    def delivery_count_limit(self) -> int:
        """The group's: its group config when the workload sets one (live changes too), else the broker's."""
        limit = self.workload.group_config.get("share.delivery.count.limit")
        return self.broker_delivery_count_limit if limit is None else int(limit)

    def run(self) -> None:
        try:
            while not self.stopping.is_set():  # each pass is one client; `recreate` starts the next
                self.recreate.clear()
                self.wake.clear()
                if self.workload.consumers_paused:  # a paused consumer holds no Kafka client: it has left its group
                    self.subscribed.set()
                    self.wake.wait(0.2)
                    continue
                self._consume_until_recreated()
        finally:
            for burial, lock_s in self.burials:  # a crash near the end still runs its course
                burial.join(lock_s + 2 * CLOSE_AFTER_LOCK_S)

    def crash(self) -> None:
        """Stop dead, as a consumer process that crashes mid-processing: no acknowledgement and no
        close, so what it holds comes back only when its acquisition locks time out. (Its Kafka client
        stays open, silent, until then, and is closed after; a new client takes its place at once.)"""
        self.crashing.set()
        self.wake.set()

    def watch(self, held: dict[int, list[tuple[int, int]]], crashed_at: float) -> None:
        """Time the redelivery of these records (a crashed consumer's) when this consumer receives them,
        including those it received before it heard of the crash."""
        keys = {(pid, sequence) for pid, ranges in held.items() for a, b in ranges for sequence in range(a, b + 1)}
        with self.lock:
            self._redelivered(self.crash_watch.watch(keys, crashed_at))

    def _bury(self, driver: ConsumerDriver, lock_s: float, unsettled: Unsettled) -> None:
        """Close a crashed client once its records' locks have run out, on a thread of its own (a close
        may take seconds). Not before: a close would release, or in implicit mode accept, what it held.
        The answers to acknowledgements it sent before the crash settle its `unsettled` records then."""

        def close_later() -> None:
            try:
                time.sleep(lock_s + CLOSE_AFTER_LOCK_S)
                driver.close()
                self._answered(driver.take_answers(), unsettled)
                self._unanswered(unsettled.take_all(), "when its crashed client closed")
            except Exception as e:  # a crashed client's close is best effort: the run goes on, the traceback logged
                log.warning("%s: closing a crashed client: %s", self.client_id, e, exc_info=True)
            finally:
                detach_thread()

        burial = threading.Thread(target=close_later, name=f"{self.client_id}-crashed", daemon=True)
        burial.start()
        self.burials = [(b, s) for b, s in self.burials if b.is_alive()] + [(burial, lock_s)]  # the ended go

    def _consume_until_recreated(self) -> None:
        w = self.workload
        driver = consumer_driver(w, self.bootstrap, self.client_id, self.spec, self._on_stats, self.security)
        self._new_generation(w.client_library.of(self.role))
        explicit = self.role == "share_consumer" and w.acknowledgement.mode == "EXPLICIT"
        last: Polled | None = None  # the last poll's records: unacknowledged until the next poll sends them
        try:
            driver.subscribe(self.topic)
            self.subscribed.set()
            self.polling.set()
            while not self.stopping.is_set() and not self.recreate.is_set() and not self.workload.consumers_paused:
                if self.crashing.is_set():
                    break
                if self.role == "consumer" and self.workload.flow_control.paused_fraction:
                    self._pause_some(driver)  # its fraction and pattern may change live
                ahead = self._may_fetch_ahead(explicit)
                driver.fetch_ahead(ahead)
                polled = driver.poll(0.2)
                polled_at = time.monotonic()
                if self.role == "share_consumer":
                    self._answered(driver.take_answers())
                else:
                    self._note_rebalances(driver)
                if polled is None:
                    last = None
                    continue
                outcomes = self._outcomes(polled.count) if explicit else None
                last = polled
                self._record(polled, outcomes)
                renewing = self.role == "share_consumer" and w.acknowledgement.renew_locks
                held = self._process(driver, polled, polled_at, self._lock_timeout_s(driver) if renewing else None)
                if self.crashing.is_set():
                    break
                # how long the locks ran before the records' acknowledgement went (fetched ahead: when taken)
                locked = polled.waited_s + (0.0 if ahead else time.monotonic() - polled_at)
                if self.role == "share_consumer" and held and self._outlasted_lock(driver, locked):
                    self._lapsed_on_last_delivery(polled, outcomes)
                if outcomes is not None:
                    driver.acknowledge(outcomes)  # sent with the next poll
        finally:
            halted = driver.halt()
            self.polling.clear()  # no poll of it takes records from here on
            if self.crashing.is_set() and self.role == "share_consumer":
                self._crashed(driver, last, halted)
            else:
                if halted.unseen is not None:  # the last poll after all, settled by the close
                    self._record(halted.unseen, None)
                driver.close()
                if self.role == "consumer":
                    self._note_rebalances(driver)  # what the close revoked
                else:  # the close settles the last poll: its answers come inside it
                    self._answered(driver.take_answers())
                    self._unanswered(self.unsettled.take_all(), "when its client closed")

    def _pause_some(self, driver: ConsumerDriver) -> None:
        """flowControl: pause the partitions chosen for this poll and resume the others. (Turning it off
        rebuilds the client: librdkafka may drop a resume that follows a pause too closely.)"""
        assigned = driver.assigned_partitions()
        if assigned:
            self.flow_polls += 1
            driver.pause_only(partitions_to_pause(assigned, self.workload.flow_control, self.flow_polls, self.rng))

    def _note_rebalances(self, driver: ConsumerDriver) -> None:
        taken = driver.take_rebalances()
        if taken:
            with self.lock:
                self.interval.rebalances += [(at - clock.offset(), kind, count) for at, kind, count in taken]

    def _may_fetch_ahead(self, explicit: bool) -> bool:
        """A share consumer fetches ahead (ConsumerDriver.fetch_ahead) while nothing waits between a
        poll and its acknowledgement: implicit mode (renewals need explicit), no processing (live too)."""
        return self.role == "share_consumer" and not (explicit or self.workload.consumer_proc_ms_max)

    def _crashed(self, driver: ConsumerDriver, last: Polled | None, halted: Halted) -> None:
        """Leave the Kafka client as a crash would (see crash()) and report what it held, unacknowledged:
        the records that come back after their lock time-out, and those the broker archives instead
        (on their last delivery). Fetched ahead, that is the batch fetched and not handed over; the
        last one was accepted by that fetch, and is answered for when the crashed client closes."""
        self.crashing.clear()
        unsettled, self.unsettled = self.unsettled, Unsettled()
        if halted.last_accepted:  # the batch fetched ahead: never received, so not among the unsettled
            held = halted.unseen
            rows = None if held is None else self._rows(held, *unpack_headers(held.headers), None)
        else:
            rows = unsettled.take(record_keys(last)) if last is not None else None
        self._bury(driver, self._lock_timeout_s(driver), unsettled)
        with self.lock:
            self.interval.crashed_at = clock.now()
            if rows is None:
                return
            ours = rows[rows["ours"]]
            on_last = ours["last"]
            settle(self.interval.crash_held, ours[~on_last])
            archive(self.interval, ours[on_last])
        log.warning("%s crashed holding %d record(s)", self.client_id, len(rows))

    def _process(self, driver: ConsumerDriver, polled: Polled, polled_at: float, lock_s: float | None) -> bool:
        """Simulated processing of one poll's records; given the lock time-out (`renewLocks`), renewing
        their acquisition locks at half of it for as long as processing outlasts it. A renewal may take
        until the lock it renews would run out. Returns whether the locks ran from the poll (False
        once renewed)."""
        w = self.workload
        times = processing_times_ms(polled.count, w.consumer_proc_ms_min, w.consumer_proc_ms_max, self.rng)
        done_at = polled_at + makespan_ms(times, w.consumer_proc_parallelism) / 1000
        renew_every = lock_s / 2 if lock_s else float("inf")
        next_renewal = polled_at + renew_every
        locked_at = polled_at  # about when the locks held now began
        from_poll = True
        while (now := time.monotonic()) < done_at and not self.wake.is_set():
            if lock_s and now >= next_renewal:  # (next_renewal is infinite without lock_s)
                renewals = driver.renew(max(locked_at + lock_s - now, RENEW_TIMEOUT_MIN_S))
                from_poll = False
                refused = renewals == RENEWAL_REFUSED
                if refused.any():  # no longer this consumer's: they come back, not a duplicate
                    self.unsettled.take(record_keys(polled)[refused])
                with self.lock:
                    self.interval.renewed += int(np.count_nonzero(renewals == RENEWED))
                    self.interval.renewals_refused += int(np.count_nonzero(refused))
                locked_at, next_renewal = now, now + renew_every
            self.wake.wait(min(done_at, next_renewal) - now)
        return from_poll

    def _lapsed_on_last_delivery(self, polled: Polled, outcomes: np.ndarray | None) -> None:
        """Processing outlasted the locks of the poll: its records on their last delivery are archived
        by the broker, which answers their acknowledgements as if they took effect (seen with Kafka
        4.3): the consumer counts them itself, now. The others come back, and their acknowledgements
        are answered as refused (`_answered`)."""
        ours, _ = unpack_headers(polled.headers)
        last = ours & (polled.delivery_counts >= self.delivery_count_limit)
        if outcomes is not None:
            last &= outcomes != REJECT  # rejected either way
        if not last.any():
            return
        rows = self.unsettled.take(record_keys(polled)[last])
        with self.lock:
            self.interval.lock_timeouts += len(rows)
            archive(self.interval, rows)

    def _outlasted_lock(self, driver: ConsumerDriver, locked_s: float) -> bool:
        """Whether records locked this long lost their locks (asked of the driver only past any lock's least)."""
        return locked_s > MIN_LOCK_S and locked_s > self._lock_timeout_s(driver)

    def _lock_timeout_s(self, driver: ConsumerDriver) -> float:
        """The acquisition lock time-out: as the client last heard it (Java), else the group's config as
        the workload sets it now, else as the broker reported it when the run started."""
        reported: float | str | None = driver.lock_timeout_ms()
        if reported is None:
            reported = self.workload.group_config.get(LOCK_DURATION, self.record_lock_ms)
        return max(float(reported), 200.0) / 1000

    def _answered(self, answers: Answers, unsettled: Unsettled | None = None) -> None:
        """The broker's answers to acknowledgements of the records kept unsettled (see count_answered)."""
        if not len(answers.keys):
            return
        unsettled = self.unsettled if unsettled is None else unsettled
        rows, status = unsettled.answered(answers.keys, answers.status)
        if len(rows):
            with self.lock:
                count_answered(self.interval, rows, status)

    def _unanswered(self, rows: np.ndarray, when: str) -> None:
        """Records whose acknowledgement was never answered: whether it took effect is unknown. As for an
        error answer (count_answered): an acknowledgement error, and in doubt."""
        if len(rows):
            log.warning("%s: %d acknowledgement(s) unanswered %s", self.client_id, len(rows), when)
            with self.lock:
                count_answered(self.interval, rows, np.full(len(rows), REFUSED, dtype=np.int8))

    def _outcomes(self, count: int) -> np.ndarray:
        """ACCEPT, RELEASE or REJECT per record, with the workload's release and reject fractions."""
        ack = self.workload.acknowledgement
        draws = self.draws.random(count)
        outcomes = np.full(count, ACCEPT, dtype=np.int8)
        outcomes[draws < ack.release_fraction + ack.reject_fraction] = REJECT
        outcomes[draws < ack.release_fraction] = RELEASE
        return outcomes

    def _time_redeliveries(self, polled: Polled, ours: np.ndarray, headers: np.ndarray, now_ns: int) -> None:
        """Records a crashed consumer held, received again: the time from the crash (lock held)."""
        again = np.flatnonzero(ours & (polled.delivery_counts > 1))
        if len(again):
            ids, sequences = headers["producer_id"][again], headers["sequence"][again]
            self._redelivered(self.crash_watch.received(now_ns / 1e9, ids, sequences))

    def _redelivered(self, delays_us: list[float]) -> None:
        """A crashed consumer's records, received again this long after the crash (lock held)."""
        if delays_us:
            self.histograms[("redelivery", -1)].record_array(np.array(delays_us))
            self.interval.redelivered_after_crash += len(delays_us)

    def _out_of_order(self, polled: Polled, ours: np.ndarray, headers: np.ndarray) -> int:
        """Records of a producer that follow a later record of it in their partition's log. A record at
        or below the last offset seen is a re-read (a rebalance, a restart), not disorder."""
        assert polled.offsets is not None  # every driver gives its records' offsets
        count = 0
        last_seen = self.last_seen
        producer_ids, sequences = headers["producer_id"].tolist(), headers["sequence"].tolist()
        for i in np.flatnonzero(ours).tolist():
            key = (int(polled.partitions[i]), producer_ids[i])
            offset, sequence = int(polled.offsets[i]), sequences[i]
            previous = last_seen.get(key)
            if previous is not None and offset > previous[0] and sequence < previous[1]:
                count += 1
            last_seen[key] = (offset, sequence)
        return count

    def _rows(self, polled: Polled, ours: np.ndarray, headers: np.ndarray, outcomes: np.ndarray | None) -> np.ndarray:
        return rows_of(record_keys(polled), ours, headers, outcomes, polled.delivery_counts, self.delivery_count_limit)

    def _await_measure_from(self) -> None:
        """Wait until the worker has said where the measured phase starts. A record of the run means
        load has started and the worker has that message, but it may not have read it yet (a busy
        host): judged before, a warm-up record would count as measured."""
        while not self.measure_known.wait(0.05) and not self.stopping.is_set():
            pass

    def _record(self, polled: Polled, outcomes: np.ndarray | None) -> None:
        """Account for one poll at receipt: counts, delivery counts, e2e latency (of delivery, so at
        receipt); a consumer group's records are settled now, a share group's are kept until the
        broker answers their acknowledgement (see _answered)."""
        now_ns = clock.now_ns()
        ours, headers = unpack_headers(polled.headers)
        if not self.measure_known.is_set() and ours.any():
            self._await_measure_from()
        settles = ours
        with self.lock:
            interval = self.interval
            interval.first_received_at = interval.first_received_at or now_ns / 1e9
            interval.last_received_at = now_ns / 1e9
            if polled.intact is not None:
                interval.corrupt += int((~(ours & polled.intact)).sum())
                if self.role == "consumer":
                    interval.out_of_order += self._out_of_order(polled, ours, headers)
            interval.polls += 1
            interval.max_poll_records = max(interval.max_poll_records, polled.count)
            interval.max_poll_partitions = max(interval.max_poll_partitions, len(distinct(polled.partitions)))
            interval.received += polled.count
            interval.received_bytes += polled.value_bytes
            if self.role == "share_consumer":
                self._time_redeliveries(polled, ours, headers, now_ns)
                settles = receive(interval, self.unsettled, self._rows(polled, ours, headers, outcomes), headers)
            else:
                settle(interval.settled, headers[ours])
            if not settles.any():
                return
            timed = headers[settles]
            intended_ns = timed["intended_ns"]
            latency_us = np.maximum(now_ns - intended_ns, 0) / 1000
            partitions = polled.partitions[settles]
            measured = intended_ns >= self.measure_from * 1e9
            for partition in distinct(partitions):
                here = partitions == partition
                self.histograms[("e2e", partition)].record_array(latency_us[here & measured])
                self.histograms[(WARMUP_PREFIX + "e2e", partition)].record_array(latency_us[here & ~measured])
