"""What the brokers themselves say while a run goes on: which brokers are registered, their own
metrics (scrapes), the groups' lag; and at the end, where each group stands. Each watch runs on a
thread of its own; the run loop takes their readings with `take` and writes them."""

import queue
import time
from collections.abc import Callable

from dimster.clock import Deadline
from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.control.run_log import RunLog
from dimster.coordinator.observers.broker_scrape import BrokerScraper
from dimster.coordinator.observers.cluster_watch import BrokerWatch
from dimster.coordinator.observers.dead_letters import DeadLetterWatch
from dimster.coordinator.observers.run_kafka import RunKafka
from dimster.errors import DimsterError
from dimster.kafka.groups import GroupSpec, LagSample, LagWatch, drain
from dimster.results.metrics_writer import MetricsWriter

LAG_EVERY = 5.0  # seconds between readings of the groups' lag from the brokers
POSITIONS_SETTLE_SECONDS = 10.0  # how long the groups' positions may take to agree with the acknowledgements
POSITIONS_LOOK_AGAIN_SECONDS = 1.0
POSITIONS_TIMEOUT_SECONDS = 90.0  # for the groups' positions at the end
PhaseAt = Callable[[float], str]  # the run's phase at an epoch time (phases.py)
HANDLER_IDLE = "kafka_server_request_handler_avg_idle_ratio"  # a one-minute rate, 0 to 1


class BrokerObservers:
    def __init__(self, kafka: RunKafka, broker_metrics_urls: dict[int, str], log: RunLog, aggregate: RunAggregate):
        self.kafka = kafka
        self.aggregate = aggregate
        self.urls = broker_metrics_urls
        self.log = log
        self.broker_watch: BrokerWatch | None = None  # once the cluster has said which brokers it has
        self.scraper: BrokerScraper | None = None  # the brokers' own metrics, while load runs
        self.samples: queue.Queue[tuple[float, int, list]] = queue.Queue()
        self.handler_idle: dict[int, float] = {}  # broker -> its request handlers' idle ratio, last scraped
        self.lag_watch: LagWatch | None = None  # the groups' lag as the brokers see it, while load runs
        self.broker_lag: LagSample | None = None  # its latest sample
        self._lag_error_said = False
        self.dead_letters: DeadLetterWatch | None = None  # the run's dead-letter topic, when it has one

    def watch_brokers(self) -> None:
        self.broker_watch = self.kafka.broker_watch()

    def warm_up(self, groups: dict[str, GroupSpec]) -> None:
        """Started before load, where their start-up cost would slow its first seconds: the lag watch's
        JVM and the brokers' first metrics answer."""
        if groups:
            self.lag_watch = self.kafka.watch_lag(groups, LAG_EVERY)
        if self.urls:
            self.scraper = BrokerScraper(
                self.urls,
                deliver=lambda at, broker, samples: self.samples.put((at, broker, samples)),
                note=lambda message: self.log.background.put(("broker_metrics", {"message": message})),
            )
            self.scraper.warm_up()

    def start_with_load(self) -> None:
        if self.broker_watch:
            self.broker_watch.start()
        if self.scraper:
            self.scraper.start()
        if self.kafka.dead_letter_topic:
            self.dead_letters = DeadLetterWatch(self.kafka, self.aggregate, self.log)
            self.dead_letters.start()

    def watch_lag(
        self, groups: dict[str, GroupSpec], metrics: MetricsWriter | None, phase_at: PhaseAt, backlog_by_group: Callable
    ) -> None:
        """Read the groups' lag from the brokers, over their partitions now (again after they grew)."""
        if self.lag_watch:
            self.lag_watch.stop()
            self.take_lag(metrics, phase_at, backlog_by_group)  # its last readings
        self.lag_watch = self.kafka.watch_lag(groups, LAG_EVERY)

    def take(self, metrics: MetricsWriter | None, phase_at: PhaseAt, backlog_by_group: Callable[[], dict]) -> None:
        """Brokers that left or came back, the brokers' metrics, the groups' lag: since the last take. A
        reading goes under the phase of the moment it was taken (`phase_at`), not of when it arrived."""
        while self.broker_watch:
            try:
                change, broker = self.broker_watch.changes.get_nowait()
            except queue.Empty:
                break
            self.log.tell(
                f"broker_{change}",
                f"-- broker {broker} {'left the cluster' if change == 'left' else 'is back'}",
                broker=broker,
            )
        self.write_samples(metrics, phase_at)
        self.take_lag(metrics, phase_at, backlog_by_group)

    def write_samples(self, metrics: MetricsWriter | None, phase_at: PhaseAt) -> None:
        while metrics:
            try:
                at, broker, samples = self.samples.get_nowait()
            except queue.Empty:
                break
            metrics.add_broker_samples(at, broker, samples, phase_at(at))
            for name, _labels, value in samples:  # the one broker figure the live diagnosis reads
                if name == HANDLER_IDLE:
                    self.handler_idle[broker] = value

    def take_lag(self, metrics: MetricsWriter | None, phase_at: PhaseAt, backlog_by_group: Callable[[], dict]) -> None:
        """The groups' positions as the brokers see them, beside dimster's own backlog. Before load
        (no metrics yet) the groups are still forming: nothing to say of their lag."""
        if self.lag_watch is None:
            return
        if metrics is None:
            self.lag_watch.take()
            drain(self.lag_watch.errors)
            return
        for sample in self.lag_watch.take():
            self.broker_lag = sample
            metrics.add_group_lag(sample, backlog_by_group(), phase_at(sample.at))
        for error in drain(self.lag_watch.errors):
            if not self._lag_error_said:  # once: a cluster that does not answer says so elsewhere too
                self._lag_error_said = True
                line = f"-- the groups' lag could not be read from the brokers: {error}"
                self.log.tell("broker_lag_unknown", line, reason=error)

    def lag(self, groups: list[str]) -> int | None:
        return sum(self.broker_lag.lag(g) for g in groups) if self.broker_lag else None

    def registered(self) -> list[int]:
        return sorted(self.broker_watch.registered) if self.broker_watch else []

    def finish(
        self,
        metrics: MetricsWriter | None,
        phase_at: PhaseAt,
        groups: list[str],
        closes: Callable,
        backlog_by_group: Callable,
    ) -> dict[str, int] | None:
        """Once the workers have closed: a last scrape (the brokers' counts at the end), where each group
        stands (`unconsumed`), the lag watch's last reading, and the dead-letter topic's records. Returns
        the unconsumed records by group."""
        if self.scraper:
            self.scraper.stop()
            self.write_samples(metrics, phase_at)
        by_group = self.unconsumed(groups, closes)
        if self.lag_watch:
            self.lag_watch.stop()
            self.take_lag(metrics, phase_at, backlog_by_group)  # with the reading of the end
        if self.dead_letters:
            self.dead_letters.finish()
        return by_group

    def unconsumed(self, groups: list[str], closes: Callable[[dict[str, int]], bool]) -> dict[str, int] | None:
        """Where each group stands now that its consumers have closed: records it could still consume (a
        drain that timed out, a forced stop) are unconsumed, not lost. The last reading before an error
        (None when there is none)."""
        if self.lag_watch is None:
            return {}
        by_group = None
        try:
            by_group = self._unconsumed_now(groups)
            # a share partition's state reaches the share coordinator moments, at times seconds, after
            # the last acknowledgements: look again each second for a while before calling the account open
            deadline = Deadline(POSITIONS_SETTLE_SECONDS)
            while not closes(by_group) and not deadline.passed():
                time.sleep(POSITIONS_LOOK_AGAIN_SECONDS)
                by_group = self._unconsumed_now(groups)
        except DimsterError as e:
            self.log.tell("group_positions_unknown", f"-- {e}: 'lost' counts every record not consumed", reason=str(e))
        return by_group

    def _unconsumed_now(self, groups: list[str]) -> dict[str, int]:
        assert self.lag_watch is not None
        reading = self.lag_watch.read_now(POSITIONS_TIMEOUT_SECONDS)
        return {group: reading.lag(group) for group in groups}

    def stop(self) -> None:
        """Every watch's thread: at the end, or when the run ends by an exception."""
        if self.broker_watch:
            self.broker_watch.stop()
        if self.scraper:
            self.scraper.stopped.set()
        if self.lag_watch:
            self.lag_watch.stop()
        if self.dead_letters:
            self.dead_letters.stopped.set()
