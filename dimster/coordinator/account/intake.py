"""What the clients' reports tell the run besides numbers (consumer-group rebalances, crashed
consumers), and what a lost worker's clients became: as counts, events and console lines."""

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from dimster.clients import REBALANCE_KINDS
from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.journal import RunJournal
from dimster.coordinator.account.live_thresholds import LiveJudge
from dimster.coordinator.account.outcome_folds import horizon_for
from dimster.coordinator.account.self_cost import SelfCost
from dimster.coordinator.control.exporter import StatusExporter
from dimster.coordinator.control.run_log import RunLog
from dimster.coordinator.workers.ensemble import Ensemble, Loss
from dimster.coordinator.workers.seam import WorkerLost
from dimster.results.metrics_writer import MetricsWriter
from dimster.verdict.judge import Spec
from dimster.worker.protocol import IntervalReport, Message, Progress, Reported, WatchRedeliveries
from dimster.worker.report_merge import merged
from dimster.workload.model import Workload

FLUSH_EVERY = 5.0  # seconds between writes of the Parquet files
EXPORT_EVERY = 1.0  # seconds between status snapshots for the metrics endpoint


class ReportIntake:
    """Each worker's report, to all that keep its numbers: the journal, the aggregate, the metrics
    endpoint, the Parquet files once load has started, and the coordinator's own cost; and its client
    events."""

    def __init__(
        self,
        a: RunAggregate,
        ensemble: Ensemble,
        log: RunLog,
        exporter: StatusExporter | None,
        journal: RunJournal,
        thresholds: list[Spec] | None = None,
    ):
        self.aggregate, self.ensemble, self.log, self.exporter = a, ensemble, log, exporter
        self.journal = journal
        self.judge = LiveJudge(thresholds or [])  # the workload's thresholds, judged while load runs
        self.self_cost = SelfCost()
        self.rebalances: dict[str, Counter] = {}  # consumer groups: rebalance callbacks per group and kind
        self.flushed = self.exported = 0.0  # when the Parquet files were last written, the endpoint fed

    def pass_on(self, metrics: MetricsWriter | None, status: Callable[[], dict]) -> None:
        """The Parquet files written every FLUSH_EVERY s, the metrics endpoint fed every EXPORT_EVERY s."""
        now = time.time()
        if self.exporter and now - self.exported >= EXPORT_EVERY:
            self.exporter.update(status())
            self.exported = now
        if metrics and now - self.flushed >= FLUSH_EVERY:
            self.flush(metrics)

    def fold_outcomes(self, lock_ms: int) -> None:
        """The share groups' long-settled records folded into counts (outcome_folds.py), the journal
        kept for an end that needs them all."""
        self.aggregate.outcomes.fold_beyond(horizon_for(lock_ms), self.journal.group_accounts)

    def follow(self, workload: Workload, told: tuple[float, int], workers: Iterable[int]) -> None:
        """A live change as the account sees it, `told` (when, and its number) to `workers`: recent
        rates (the status's, pacing's) from after it, and the fold horizon widened to a longer lock
        duration (never narrowed: records locked before may still come back as late as the longer lock
        allowed)."""
        self.aggregate.restart_rates(*told, workers)
        if lock_ms := workload.record_lock_ms:
            self.aggregate.outcomes.widen_horizon(horizon_for(lock_ms))

    def _progress(self, index: int, sample: Progress) -> None:
        """A worker's counts after a live change: the change's rates, told once they cover half a second."""
        since_change = self.aggregate.workers.since_change
        since_change.note(index, sample)
        if rates := since_change.to_tell(sample.at):
            pub, target, cons, seconds = (rates[k] for k in ("pubRate", "targetRate", "consRate", "rateSeconds"))
            line = f"-- since the change ({seconds:.1f} s): pub {pub:,.0f} msg/s (target {target:,.0f}), "
            line += f"cons {cons:,.0f} msg/s"
            self.log.tell("rates_since_change", line, **{k: round(v, 3) for k, v in rates.items()})

    def start_load(self, load_started: float) -> None:
        self.flushed = time.time()
        self.journal.load(load_started)

    def flush(self, metrics: MetricsWriter, last: bool = False) -> None:
        """The Parquet files written (behind the loop), and the journal told when they are; after the
        `last`, the writes and the merges behind done (the end's merge must be the only one)."""
        metrics.flush(self.journal.written)
        self.flushed = time.time()
        if last:
            metrics.close()

    def taken(
        self,
        received: list[tuple[int, Message | WorkerLost]],
        metrics: MetricsWriter | None,
        phase_of: Callable[[float], str],
        loading: bool,
    ) -> Iterator[tuple[int, Message | WorkerLost]]:
        """What was received but the reports, in order; each run of reports taken in before what follows
        it: journaled first (one write a file; a crash after it loses nothing), then as few merged reports as keep
        each one's phase (the phase its end falls in) and each worker's lines apart (report_merge.py,
        as an agent merges: a merged report counts, shows and writes what its reports do alone), so
        that the coordinator's cost per report is paid once a run. `loading`: load has started."""
        batch: list[Reported] = []
        phase, workers = "", set[int]()
        for index, message in received:
            if isinstance(message, Progress):  # the status's alone: it changes nothing of the account
                self._progress(index, message)
                continue
            if not isinstance(message, Reported):
                self._take(batch, phase, metrics)
                batch, workers = [], set()
                yield index, message
                continue
            report = message.report
            report_phase, its_workers = phase_of(report.end_time), {line.worker_index for line in report.lines}
            if batch and (report_phase != phase or workers & its_workers):
                self._take(batch, phase, metrics)
                batch, workers = [], set()
            if loading:
                self.self_cost.report_handled(report.end_time, len(report.lines))
            batch.append(message)
            phase, workers = report_phase, workers | its_workers
        self._take(batch, phase, metrics)

    def _take(self, taken: list[Reported], phase: str, metrics: MetricsWriter | None) -> None:
        """Reports of one phase and of different workers: journaled (at once), then taken in as one."""
        if not taken:
            return
        journaled, part = (phase, metrics.parts) if metrics else (None, 0)
        self.journal.reports([(message.report, journaled, part, message.received) for message in taken])
        reports = [message.report for message in taken]
        report = reports[0] if len(reports) == 1 else merged(reports, unite=False)
        self.aggregate.add(report, phase)
        self.judge.take(report, phase, self.aggregate.load_started)
        note_crashes(report, self.ensemble, self.log)
        note_rebalances(report, self.rebalances, self.log)
        if self.exporter:
            self.exporter.add(report)
        if metrics:
            metrics.add(report, phase)


def note_rebalances(report: IntervalReport, rebalances: dict[str, Counter], log: RunLog) -> None:
    """Consumer groups: every member's rebalance callbacks as events, counted per group (run.json)."""
    seen: dict[str, Counter] = {}
    clients = report.clients
    for i, details in clients.details.items():
        if not details.rebalances:  # most clients' details have none (a share consumer's never)
            continue
        client, group = clients.client_id[i], clients.group[i]
        for at, kind, partitions in details.rebalances:
            log.event(f"consumer_{kind}", client=client, group=group, at=at, partitions=partitions)
            seen.setdefault(group, Counter())[kind] += 1
    for group, counts in seen.items():
        rebalances.setdefault(group, Counter()).update(counts)
        told = ", ".join(f"{counts[kind]} {kind}" for kind in REBALANCE_KINDS if counts[kind])
        log.say(f"-- {group}: rebalance callbacks: {told}")


def note_crashes(report: IntervalReport, ensemble: Ensemble, log: RunLog) -> None:
    """A crashed consumer reported what it held: the group's consumers watch for those records."""
    clients = report.clients
    crashed_at = clients.real("crashed_at")
    for i in crashed_at.nonzero()[0].tolist():
        client, group, at = clients.client_id[i], clients.group[i], float(crashed_at[i])
        held_ranges = clients.detail(i).crash_held
        held = sum(last - first + 1 for ranges in held_ranges.values() for first, last in ranges)
        log.tell(
            "consumer_crashed",
            f"-- consumer {client} crashed holding {held:,} record(s): back after their lock time-out",
            client=client,
            group=group,
            at=at,
            held=held,
        )
        ensemble.send_all(WatchRedeliveries(group, at, held_ranges))


def note_worker_lost(
    index: int, lost: WorkerLost, loss: Loss, a: RunAggregate, log: RunLog, journal: RunJournal
) -> None:
    """Its producers' sequences end where it was last heard of; its consumers' unreported tail is in doubt."""
    journal.lost(loss.clients, lost.stopped_by, index, loss.groups)
    a.clients_lost(loss.clients, lost.stopped_by, index, loss.groups)
    a.workers.since_change.lose(index)
    log.event("worker_lost", worker=index, reason=lost.reason, clients=loss.clients)


def note_unclosed(
    unclosed: list[int], ensemble: Ensemble, a: RunAggregate, log: RunLog, journal: RunJournal
) -> str | None:
    """Workers that did not close in time were not heard to their end: each is lost at its last report,
    its consumers' unreported tail in doubt, not lost. What to fail the run with (None: all closed)."""
    at = time.time()
    for index, loss in ensemble.lose_all(unclosed).items():
        note_worker_lost(index, WorkerLost(f"worker {index} did not close in time", at), loss, a, log, journal)
    if not unclosed:
        return None
    more = f" and {len(unclosed) - 10:,} more" if len(unclosed) > 10 else ""
    return f"worker(s) {', '.join(map(str, unclosed[:10]))}{more} did not close in time"


def note_replaced(index: int, lost: WorkerLost, loss: Loss, log: RunLog) -> None:
    moved = loss.placed.moved
    log.tell(
        "clients_replaced",
        f"-- {lost.reason}: its {len(loss.replaced)} client(s) {', '.join(loss.replaced) or '-'} go on as "
        f"{', '.join(f'{c} on worker {w}' for c, w in moved.items()) or 'nothing'}",
        worker=index,
        lost=loss.replaced,
        new=moved,
    )
