"""The coordinator's view of a run, built from the workers' interval reports: totals, per-group
settled sequences (lost and duplicated records), and the windows the console line shows."""

import math
import time
from collections import Counter, defaultdict
from collections.abc import Iterable

import numpy as np

from dimster.coordinator.account.lost_tails import LostTails
from dimster.coordinator.account.report_lines import PACING_WINDOW, LineSpan, WorkerLines, count_settled
from dimster.coordinator.account.share_outcomes import ShareOutcomes
from dimster.coordinator.account.window import Window
from dimster.diagnosis.generator import saturated
from dimster.metrics.histogram import Histogram
from dimster.metrics.schema import WARMUP_PREFIX
from dimster.metrics.sequences import RangeSet, ranges_size
from dimster.results.records import GroupAccount
from dimster.worker.client_columns import COUNT_INDEX, REAL_INDEX
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import IntervalReport
from dimster.workload.modes.base import Probe, ReceiveSpan

# the columns of a report's counters (worker/client_columns.py) that the aggregate reads
PRODUCER_SUMS = np.array([COUNT_INDEX[name] for name in ("sent", "acked", "send_errors")])
NEXT_SEQUENCE, ACKED, RECEIVED = COUNT_INDEX["next_sequence"], COUNT_INDEX["acked"], COUNT_INDEX["received"]
SENT = COUNT_INDEX["sent"]
MAX_POLL_RECORDS = COUNT_INDEX["max_poll_records"]
TARGET_RATE, CRASHED_AT = REAL_INDEX["target_rate"], REAL_INDEX["crashed_at"]
FIRST_RECEIVED, LAST_RECEIVED = REAL_INDEX["first_received_at"], REAL_INDEX["last_received_at"]
# consumers' counters summed into the aggregate's attributes of the same name (received and polls apart)
CONSUMER_SUMS = (
    "received", "polls", "corrupt", "out_of_order", "accepted", "released", "rejected", "renewed", "renewals_refused",
    "lock_timeouts", "ack_errors", "redelivered_after_crash",
)  # fmt: skip
CONSUMER_SUM_COLUMNS = np.array([COUNT_INDEX[name] for name in CONSUMER_SUMS])


class RunAggregate:
    def __init__(self, groups: dict[str, str]):
        self.groups = groups  # group -> topic
        self.sent = 0
        self.acked = 0
        self.send_errors = 0
        self.received = 0
        self.accepted = self.released = self.rejected = 0
        self.acked_by_topic: dict[str, int] = defaultdict(int)
        self.next_sequence: dict[int, int] = {}  # producer id -> sequences handed out
        self.failed: dict[int, RangeSet] = defaultdict(RangeSet)  # producer id -> sequences whose send failed
        self.acked_by_producer: dict[int, int] = defaultdict(int)
        self.lost_producers: set[int] = set()  # on a lost worker: their last sends' fate is unknown
        self.tails = LostTails()  # what consumers of a lost worker may have settled after their last report
        self.producer_topic: dict[int, str] = {}
        self.settled: dict[tuple[str, int], RangeSet] = defaultdict(RangeSet)  # (group, producer id)
        self.settled_by_group: dict[str, int] = defaultdict(int)
        self.outcomes = ShareOutcomes()  # share groups: of the settled records, the rejected and archived
        self.renewed = self.renewals_refused = self.lock_timeouts = self.ack_errors = 0
        self.crashes = self.redelivered_after_crash = 0
        self.duplicates = 0
        # dead-letter queues (KIP-1191), None when the run has none: the live count is the topic's
        # records so far; at the end, the run's records found there, and where that differs from
        # rejected + archived (coordinator/observers/dead_letters.py)
        self.dead_lettered: int | None = None
        self.dead_letter_missing: int | None = None
        self.dead_letter_duplicates: int | None = None
        self.dead_letter_by_group: dict[str, dict[str, int | None]] = {}  # the three, and `unexpected`, per group
        self.target_rate: dict[str, float] = {}  # producer client id -> latest target
        # producer client id -> (report end time, its latest client statistics)
        self.producer_stats: dict[str, tuple[float, dict]] = {}
        self.window = Window()  # the console's
        self.probe = Window()  # a plan's (see take_probe)
        self.probing = False  # fed only for plans that judge the run (it costs a histogram merge per report)
        self.span = ReceiveSpan()  # records received since mark_receiving()
        self.corrupt = 0
        self.out_of_order = 0
        self.e2e_measured = Histogram()  # the measured phase's end-to-end latency, whole run
        self.load_started = 0.0  # set when load starts: the first report of a worker covers from then
        self.workers = WorkerLines()  # each worker's clock, its instant's counts, its recent rates

    def add(self, report: IntervalReport, phase: str | None = None) -> None:
        """A report (of `phase`, where the run loop knows it: the console's windows split by it)."""
        spans = self.workers.spans(report, self.load_started, time.time())
        windows = (self.window, self.probe) if self.probing else (self.window,)  # a plan's: diagnosis/generator.py
        owner = report.client_line  # each client's line
        delays = report.histograms.of_owners("publish_delay", owner)
        for k, (line, span) in enumerate(zip(report.lines, spans, strict=True)):
            for window in windows:
                window.use(line, span.share, delays.get(k))
                window.cover(line.worker_index, span.covered, span.waited, phase)
        # this report's counts for a plan's probe, a Counter a line: ("sent",), ("acked", topic), ("settled", group)
        counted: list[Counter] = [Counter() for _ in report.lines]
        producing = np.array([role == "producer" for role in report.clients.role], bool)
        sent, acked, target = self._add_producers(report, producing, owner, counted)
        received = self._add_consumers(report, ~producing, spans, counted)
        self.outcomes.fold_due(self._kept)
        if self.tails.open:
            self.tails.end_due(self.workers.last_report, self._sent_of)
        self._merge_latencies(report.histograms)
        if self.probing:
            for line, counts in zip(report.lines, counted, strict=True):
                self.probe.by_worker.setdefault(line.worker_index, Counter()).update(counts)
        self.workers.note(spans, sent, acked, received, target)

    def _add_producers(
        self, report: IntervalReport, producing: np.ndarray, owner: np.ndarray, counted: list[Counter]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The report's producers' counts (its clients where `producing`); their records sent and
        acknowledged and their target rate, each summed per line."""
        clients, lines = report.clients, len(report.lines)
        counts, reals = clients.tables
        sent, acked, errors = counts[producing][:, PRODUCER_SUMS].sum(axis=0).tolist()
        self.sent += sent
        self.acked += acked
        self.send_errors += errors
        self.window.sent += sent
        mine = owner[producing]
        by_line = [
            np.bincount(mine, weights=values, minlength=lines)
            for values in (counts[producing, SENT], counts[producing, ACKED], reals[producing, TARGET_RATE])
        ]
        rows = np.flatnonzero(producing).tolist()
        client_ids, topics = [clients.client_id[i] for i in rows], [clients.topic[i] for i in rows]
        producer_ids, acks = [int(c[1:]) for c in client_ids], counts[producing, ACKED].tolist()
        self.producer_topic.update(zip(producer_ids, topics, strict=True))
        self.next_sequence.update(zip(producer_ids, counts[producing, NEXT_SEQUENCE].tolist(), strict=True))
        self.target_rate.update(zip(client_ids, reals[producing, TARGET_RATE].tolist(), strict=True))
        for producer_id, topic, acked in zip(producer_ids, topics, acks, strict=True):
            self.acked_by_producer[producer_id] += acked
            self.acked_by_topic[topic] += acked
        for i, details in clients.details.items():
            if producing[i]:
                self.failed[int(clients.client_id[i][1:])].add_values(details.failed_sequences)
                if details.client_stats:
                    end = report.lines[int(owner[i])].end_time
                    self.producer_stats[clients.client_id[i]] = (end, details.client_stats)
        if self.probing:  # a plan's probe's counts a line
            for topic, acked, line in zip(topics, acks, mine.tolist(), strict=True):
                counted[line]["acked", topic] += acked
            for line_counts, line_sent in zip(counted, by_line[0].tolist(), strict=True):
                line_counts["sent",] += round(line_sent)
        return by_line[0], by_line[1], by_line[2]

    def _add_consumers(
        self, report: IntervalReport, consuming: np.ndarray, spans: list[LineSpan], counted: list[Counter]
    ) -> np.ndarray:
        """The report's consumers' counts, settled ranges and outcomes (its clients where `consuming`);
        the records they received, summed per line."""
        clients, end, lines = report.clients, report.end_time, len(report.lines)
        counts, reals = (table[consuming] for table in clients.tables)
        mine = report.client_line[consuming]
        took = counts[:, RECEIVED]
        received_by_line = np.bincount(mine, weights=took, minlength=lines)
        if not len(counts):
            return received_by_line
        sums = dict(zip(CONSUMER_SUMS, counts[:, CONSUMER_SUM_COLUMNS].sum(axis=0).tolist(), strict=True))
        received = sums.pop("received")
        self.received += received
        self.window.received += received
        self.window.polls += sums.pop("polls")
        self.window.max_poll_records = max(self.window.max_poll_records, int(counts[:, MAX_POLL_RECORDS].max()))
        for name, value in sums.items():  # accepted, released, rejected, renewed, ...
            setattr(self, name, getattr(self, name) + value)
        self.crashes += int(np.count_nonzero(reals[:, CRASHED_AT]))
        if received:
            receiving = reals[took > 0]
            span, first = self.span, float(receiving[:, FIRST_RECEIVED].min())
            span.received += received
            span.first = min(span.first or first, first)
            span.last = max(span.last, float(receiving[:, LAST_RECEIVED].max()))
        rows = np.flatnonzero(consuming).tolist()
        groups = [clients.group[i] for i in rows]
        longest = max(s.covered for s in spans)
        for group, account in report.groups.items():  # its consumers' ranges, merged (worker/accounts.py)
            self.outcomes.add(group, account.received, account, end, longest)
            self.duplicates += account.duplicates
            new_in_group = 0
            duplicates = 0
            for producer_id, ranges in account.settled.items():
                duplicates += self.settled[(group, producer_id)].add_many(ranges)
                new_in_group += ranges_size(ranges)
            new_in_group -= duplicates
            self.duplicates += duplicates
            self.settled_by_group[group] += new_in_group
            if new_in_group and self.probing:
                count_settled(counted, group, new_in_group, np.array(groups, object) == group, mine, took)
        self.tails.reported([clients.client_id[i] for i in rows], groups, self.settled_by_group)
        return received_by_line

    def _merge_latencies(self, histograms: HistogramColumns) -> None:
        """The console's publish and end-to-end latencies (warm-up's too), the run's measured end-to-end."""
        merged = histograms.by_metric
        for metric in ("publish", WARMUP_PREFIX + "publish"):
            if metric in merged:
                self.window.publish.merge_wire(merged[metric])
        for metric in ("e2e", WARMUP_PREFIX + "e2e"):
            if metric in merged:
                self.window.e2e.merge_wire(merged[metric])
                if self.probing:
                    self.probe.e2e.merge_wire(merged[metric])
        if "e2e" in merged:
            self.e2e_measured.merge_wire(merged["e2e"])

    def _kept(self, group: str, producer_id: int) -> list[RangeSet]:
        """The producer's records the group will not see again, as far as the run knows: settled or
        never sent (share_outcomes.ShareOutcomes.fold_due)."""
        return [self.settled.get((group, producer_id), RangeSet()), self.failed.get(producer_id, RangeSet())]

    def take_probe(self) -> Probe:
        """A plan's numbers since its previous call: the producers' rate, how far the group that fell
        furthest behind consumed below what was acknowledged on its topic, and e2e latency."""
        probe, self.probe = self.probe, Window()
        behind = {
            group: probe.rate(("acked", topic)) - probe.rate(("settled", group)) for group, topic in self.groups.items()
        }
        slowest = max(behind, key=lambda group: behind[group], default=None)
        return Probe(
            seconds=max(probe.seconds.values(), default=0.0),
            published=probe.rate(("sent",)),
            consumed=probe.rate(("settled", slowest)) if slowest else 0.0,
            behind=max(0.0, behind[slowest]) if slowest else 0.0,
            e2e=probe.e2e,
            worker_wait_share=probe.wait_share(),
            generator=saturated(probe.loads()),
            acked=sum(probe.rate(("acked", topic)) for topic in set(self.groups.values())),
        )

    def mark_receiving(self) -> None:
        self.span = ReceiveSpan()

    def receiving(self) -> ReceiveSpan:
        return self.span

    def restart_rates(self, at: float = 0.0, change: int = 0, workers: Iterable[int] = ()) -> None:
        """Recent rates (the status's, and pacing's) afresh: at load start, or after live change number
        `change`, sent to `workers` at `at` (report_lines.py: WorkerLines.restart)."""
        self.workers.restart(at, change, set(workers))

    def recent_rates(self, seconds: float = PACING_WINDOW) -> dict[str, float]:
        """Achieved publish and consume rates and the target, msg/s over the last `seconds` (the pacing
        window) of reports, summed over workers (each worker's counts divided by the time its reports
        covered)."""
        return self.workers.recent.rates(seconds)

    @property
    def backlog(self) -> int:
        """Acknowledged records not yet settled, summed over groups."""
        return sum(self.backlog_by_group().values())

    def backlog_by_group(self) -> dict[str, int]:
        return {
            group: max(0, self.acked_by_topic[topic] - self.settled_by_group[group])
            for group, topic in self.groups.items()
        }

    def clients_lost(
        self, client_ids: list[str], stopped_by: float, worker: int | None = None, groups: dict[str, str] | None = None
    ) -> None:
        """Worker `worker`'s clients, gone with it (surely stopped by `stopped_by`): its producers'
        sequences end where they were reported; its consumers' (client id -> group: `groups`, else as
        they reported) unreported tail is in doubt."""
        self.lost_producers.update(int(c[1:]) for c in client_ids if c.startswith("p"))
        self.tails.lose(worker, [c for c in client_ids if c.startswith("c")], stopped_by, groups or {})

    def lost(self, unconsumed: dict[str, int] | None = None) -> int:
        """Acknowledged records a group never settled and can no longer consume: those still within
        its reach at the end (`unconsumed`, from the group's own position) are not lost, nor are
        those a lost worker's consumers may have settled unreported (`in_doubt`)."""
        return sum(self._lost_by_group(unconsumed or {}).values())

    def _lost_by_group(self, unconsumed: dict[str, int]) -> dict[str, int]:
        return {
            group: max(0, n - unconsumed.get(group, 0) - self.doubt(group))
            for group, n in self.missing_by_group().items()
        }

    def doubt(self, group: str) -> int:
        """The group's records whose fate only the broker knew: a lost worker's consumers' unreported
        tail, acknowledgements answered with an error or never answered, and records the dead-letter
        topic did not confirm (share_outcomes.py)."""
        tails = 0
        if self.tails.tails:
            acked, sent = self.acked_by_topic[self.groups[group]], self._sent_of(group)
            tails = self.tails.bound(group, acked, sent, lambda p: self.settled.get((group, p), RangeSet()))
        return tails + self.outcomes.doubtful_count(group)

    def _sent_of(self, group: str) -> dict[int, int]:
        """The next sequence of each producer of the group's topic."""
        topic = self.groups[group]
        return {p: n for p, n in self.next_sequence.items() if self.producer_topic[p] == topic}

    def in_doubt(self, unconsumed: dict[str, int] | None = None) -> int:
        """Of the records missing at the end, those in doubt (doubt()): whose fate only the broker knew."""
        return sum(self._in_doubt_by_group(unconsumed or {}).values())

    def _in_doubt_by_group(self, unconsumed: dict[str, int]) -> dict[str, int]:
        return {
            group: min(self.doubt(group), max(0, n - unconsumed.get(group, 0)))
            for group, n in self.missing_by_group().items()
        }

    def account(self, unconsumed: dict[str, int] | None) -> dict[str, GroupAccount]:
        """Per group, where every acknowledged record went: acked = accepted + rejected + archived +
        unconsumed + in_doubt + lost. Each term but `lost` is counted on its own (each record once);
        `lost` is what the others leave, never negative, so an account whose terms add up to more
        than was acknowledged does not close, by `unaccounted` (negative) records."""
        if self.outcomes.late:  # a record came back after it was folded: count every record again
            self.outcomes.restore()
        known = unconsumed is not None
        unconsumed = unconsumed or {}
        lost, in_doubt = self._lost_by_group(unconsumed), self._in_doubt_by_group(unconsumed)
        accounts: dict[str, GroupAccount] = {}
        for group, topic in self.groups.items():
            rejected, archived = self.outcomes.count("rejected", group), self.outcomes.count("archived", group)
            settled = self.settled_by_group[group] + self.outcomes.settled_correction(group)
            group_unconsumed, group_lost = (unconsumed.get(group), lost.get(group, 0)) if known else (None, None)
            accepted, group_in_doubt = settled - rejected - archived, in_doubt.get(group, 0)
            terms = (accepted, rejected, archived, group_unconsumed or 0, group_in_doubt, group_lost or 0)
            unaccounted = self.acked_by_topic[topic] - sum(terms)
            dead_letters = self.dead_letter_by_group.get(group, {})
            accounts[group] = {
                "acked": self.acked_by_topic[topic],
                "accepted": accepted, "rejected": rejected, "archived": archived, "unconsumed": group_unconsumed,
                "in_doubt": group_in_doubt, "lost": group_lost,
                "closes": known and unaccounted == 0,
                "unaccounted": unaccounted,
                "dead_lettered": dead_letters.get("dead_lettered"),
                "dead_letter_missing": dead_letters.get("dead_letter_missing"),
                "dead_letter_duplicates": dead_letters.get("dead_letter_duplicates"),
            }  # fmt: skip
        return accounts

    def closes(self, unconsumed: dict[str, int]) -> bool:
        """Whether every group's account closes, given where the groups stand."""
        return all(g["closes"] for g in self.account(unconsumed).values())

    def missing_by_group(self) -> dict[str, int]:
        """Per group: acknowledged records it never settled (meaningful once consumers have closed)."""
        missing: dict[str, int] = {}
        for group, topic in self.groups.items():
            missing[group] = 0
            for producer_id, next_sequence in self.next_sequence.items():
                if self.producer_topic[producer_id] != topic:
                    continue
                ranges = self.settled.get((group, producer_id), RangeSet())
                failed = self.failed[producer_id]
                failed_missing = failed.count() - failed.overlap(ranges)
                unsettled = ranges.missing_below(next_sequence) - failed_missing
                if producer_id in self.lost_producers:
                    # records in flight at its last report may never have been acknowledged: not lost
                    in_flight = next_sequence - self.acked_by_producer[producer_id] - failed.count()
                    unsettled = max(0, unsettled - max(0, in_flight))
                missing[group] += unsettled
            missing[group] -= self.outcomes.settled_correction(group)  # the dead-letter topic's word
        return missing

    def take_window(self, live: Iterable[int] = (), overdue_after: float = math.inf) -> dict:
        """The console's numbers since the previous call; sent, acked and received as of the last
        instant every live worker has reported (the totals go on in `sent`, `acked`, `received`).
        `overdue`: each of the `live` workers with no report in the window and none for more than
        `overdue_after` seconds, and for how long: the window's figures lack its clients."""
        now, window, self.window = time.time(), self.window, Window()
        known = self.workers.heard
        heard = {w: known[w] for w in live if w in known and w not in window.seconds}
        overdue = {w: round(now - at, 1) for w, at in heard.items() if now - at > overdue_after}
        instant = self.workers.instant
        sent, acked, received = instant.counts(instant.cut(), 3)
        seconds = max(window.seconds.values(), default=0.0) or 1e-6
        recent = self.recent_rates()

        def ms(histogram: Histogram, q: float):
            value = histogram.percentile(q)
            return None if value is None else value / 1000

        return {
            "pubRate": window.sent / seconds,
            "consRate": window.received / seconds,
            "targetRate": recent["targetRate"],
            "pubRate10s": recent["pubRate"],
            "sent": sent,
            "acked": acked,
            "received": received,
            "backlog": self.backlog,
            "e2eP50Ms": ms(window.e2e, 50),
            "e2eP99Ms": ms(window.e2e, 99),
            "publishP99Ms": ms(window.publish, 99),
            "recordsPerPoll": window.received / window.polls if window.polls else None,
            "maxPollRecords": window.max_poll_records if window.polls else None,
            "workerWaitShare": window.wait_share(),
            "seconds": seconds,
            "phases": window.phase_seconds(),  # phase -> the seconds of the window its reports went under
            "generator": [load.to_json() for load in saturated(window.loads())],  # workers behind schedule
            "overdue": overdue,
            "duplicates": self.duplicates,
            "dead_lettered": self.dead_lettered,
            "sendErrors": self.send_errors,
        }
