"""A crashed run's end, recorded after the fact by `dimster summarize`: its journal (journal.py) replayed
into the aggregate the coordinator had, the metrics it had not yet written, and the account closed
from what the brokers say now (their logs' ends and the groups' positions).

After a crash every worker died with the coordinator, each after its last report the coordinator took.
A record the broker took after its producer's last report is in the log but in no report, so a crashed
run's `acked` is what the run's topics hold. What the log holds beyond the records the reports settled
and the group's unconsumed records, the broker counts as consumed: a consumer group's position is its
last commit, and a consumer commits what it polled; a share group's lag (KIP-1226) counts every record
whose delivery has not completed, so the others were acknowledged (or archived). Either way the run's
consumers settled them after their last report the coordinator took: in doubt, never lost, however long
the crash came after that report (on a busy host the coordinator may trail its workers' reports by
seconds). A consumer group's records past its commit that its consumers had reported received are
settled, not unconsumed (read from the log, each by its producer and sequence)."""

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from dimster import yamlcore
from dimster.cluster.backends import backend_for
from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.end import run_totals
from dimster.coordinator.account.journal import JOURNAL, read_journal, tail_files
from dimster.coordinator.observers.run_kafka import RunKafka
from dimster.environment import load_environment
from dimster.errors import DimsterError
from dimster.kafka.admin import records_in_log
from dimster.kafka.groups import GroupSpec
from dimster.kafka.records import identities_between
from dimster.processes import TrackedProcess
from dimster.results.bundle import mark_crashed
from dimster.results.metrics_parts import compact_parts, written_flushes
from dimster.results.metrics_writer import MetricsWriter
from dimster.results.records import write_run_json

POSITIONS_TIMEOUT_SECONDS = 60.0


@dataclass
class Replay:
    """What the journal tells: the aggregate as the coordinator had it."""

    aggregate: RunAggregate = field(default_factory=lambda: RunAggregate({}))
    topics: dict[str, int] = field(default_factory=dict)  # topic -> partitions
    groups: dict[str, dict] = field(default_factory=dict)  # group -> {kind, topic, partitions}
    load_started: float = 0.0
    last_report: dict[int, float] = field(default_factory=dict)  # worker -> end of its last report
    clients: dict[int, list[str]] = field(default_factory=dict)  # worker -> its clients at its last report
    reports: int = 0


def replay(path: Path) -> Replay:
    """The journal at `path` fed to a fresh aggregate, then every worker lost at its last report."""
    r = Replay()
    for record in read_journal(path):
        kind = record[0]
        if kind == "start":
            r.topics, r.groups = record[1]["topics"], record[1]["groups"]
            r.aggregate = RunAggregate({group: spec["topic"] for group, spec in r.groups.items()})
        elif kind == "load":
            r.load_started = r.aggregate.load_started = record[1]
        elif kind == "report":
            report = record[1]
            r.aggregate.add(report)
            r.reports += 1
            start = 0
            for line in report.lines:
                r.last_report[line.worker_index] = max(r.last_report.get(line.worker_index, 0.0), line.end_time)
                r.clients[line.worker_index] = report.clients.client_id[start : start + line.clients]
                start += line.clients
        elif kind == "lost":
            worker, groups = (record[3], record[4]) if len(record) > 4 else (None, None)
            r.aggregate.clients_lost(record[1], record[2], worker, groups)
    for worker, clients in r.clients.items():  # the crash took every worker after its last report
        r.aggregate.clients_lost(clients, r.last_report[worker], worker)
    return r


def write_tail(run_dir: Path, metrics: Path, load_started: float) -> int:
    """The journal tail's reports that no Parquet part holds, as one more part of each table. Returns
    how many were written."""
    written = written_flushes(metrics / "workers")  # a row each
    tails = (record for tail in tail_files(run_dir) for record in read_journal(tail))
    unwritten = [(record[1], record[3]) for record in tails if record[2] not in written]
    if not unwritten:
        return 0
    writer = MetricsWriter(metrics, load_started)
    writer.parts = max(written, default=-1) + 1
    for phase, report in unwritten:
        writer.add(report, phase)
    writer.flush()
    return len(unwritten)


def crashed_account(a: RunAggregate, in_log: dict[str, int] | None, unconsumed: dict[str, int] | None) -> dict:
    """Per group: acked (its topic's log, else what producers reported) = accepted + rejected +
    archived + unconsumed + in_doubt + lost. What the log holds beyond the settled and the unconsumed
    records the broker counts as consumed, by the run's consumers after their last report: in doubt."""
    accounts = {}
    for group, topic in a.groups.items():
        rejected, archived = a.outcomes.count("rejected", group), a.outcomes.count("archived", group)
        settled = a.settled_by_group[group]
        acked = in_log[topic] if in_log is not None else a.acked_by_topic[topic]
        terms: dict = {"accepted": settled - rejected - archived, "rejected": rejected, "archived": archived}
        if unconsumed is None:
            terms |= {"unconsumed": None, "in_doubt": 0, "lost": None}
        else:
            beyond = max(0, acked - settled - unconsumed.get(group, 0))
            terms |= {"unconsumed": unconsumed.get(group, 0), "in_doubt": beyond, "lost": 0}
        unaccounted = acked - sum(v or 0 for v in terms.values())
        closes = unconsumed is not None and unaccounted == 0
        accounts[group] = {"acked": acked, **terms, "closes": closes, "unaccounted": unaccounted}
    return accounts


def brokers_view(info: dict, r: Replay, delete_topics: bool) -> tuple[dict[str, int], dict[str, int]]:
    """Through the run's environment: each topic's records in its log, each group's unconsumed records;
    then the run's topics deleted, as the run would have (`delete_topics`)."""
    profile = load_environment(info.get("environment") or "")
    security = backend_for(profile).client_security()
    in_log = records_in_log(profile.bootstrap_servers, r.topics, security=security)
    kafka = RunKafka(profile.bootstrap_servers, profile.kafka_version, security)
    unconsumed = {}
    if r.groups:
        specs = {g: GroupSpec(spec["kind"], spec["topic"], 0, spec["partitions"]) for g, spec in r.groups.items()}
        watch = kafka.watch_lag(specs, 3600)
        try:
            reading = watch.read_now(POSITIONS_TIMEOUT_SECONDS)
        finally:
            watch.stop()
        unconsumed = {group: reading.lag(group) for group in r.groups}
        for group, spec in r.groups.items():
            if spec["kind"] == "consumer":
                spans = {p: (start, start + lag) for p, (start, lag) in reading.groups.get(group, {}).items()}
                read = identities_between(profile.bootstrap_servers, security, spec["topic"], spans)
                unconsumed[group] -= received_past_commit(r.aggregate, group, read)
    if delete_topics:
        kafka.delete_topics(list(r.topics))
    return in_log, unconsumed


def received_past_commit(a: RunAggregate, group: str, identities: Iterable[tuple[int, int]]) -> int:
    """How many of the records past a consumer group's commit (their producer and sequence) its
    consumers reported received."""
    return sum(1 for producer, sequence in identities if sequence in a.settled.get((group, producer), ()))


def keeps_topics(run_dir: Path) -> bool:
    try:
        workload = yamlcore.load((run_dir / "workload.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return True  # unknown: nothing is deleted
    return not isinstance(workload, dict) or bool(workload.get("keepTopics", False))


def recover_crashed(run_dir: Path) -> list[str]:
    """When `run_dir` is a run whose coordinator died without recording its end: record it from the
    journal (run.json `crashed`, its totals and account; the metrics it had not written). Returns what
    it did, as notes; nothing for a run that recorded its end."""
    path = run_dir / "run.json"
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if info.get("status") == "running":
        process = info.get("coordinator_process") or {}
        if process and TrackedProcess(process.get("pid", 0), process.get("started", 0.0)).alive():
            pid = process["pid"]
            raise DimsterError(f"{run_dir.name} is still running (coordinator pid {pid}): summarize it once it ends")
        mark_crashed(run_dir, process.get("pid", 0))
        info = json.loads(path.read_text())
    journal = run_dir / JOURNAL
    if info.get("status") != "crashed" or not journal.is_file():
        return []
    try:
        r = replay(journal)
    except (ValueError, TypeError, KeyError, IndexError) as e:  # not a journal of ours (msgpack's are ValueErrors)
        raise DimsterError(f"{run_dir.name}/{JOURNAL} cannot be read ({type(e).__name__}: {e})") from None
    notes = [f"the run crashed: its end is recorded from its journal ({r.reports:,} reports)"]
    if written := write_tail(run_dir, run_dir / "metrics", r.load_started):
        notes.append(f"{written:,} report(s) not yet in the metrics files were written from the journal")
    in_log = unconsumed = None
    try:
        in_log, unconsumed = brokers_view(info, r, not keeps_topics(run_dir))
    except DimsterError as e:
        notes.append(f"the groups' positions are unknown ({e}): the account stays open")
    a = r.aggregate
    account = crashed_account(a, in_log, unconsumed)
    totals = run_totals(a, unconsumed, account)
    totals |= {
        "acked": sum(in_log.values()) if in_log is not None else a.acked,
        "acked_reported": a.acked,
        "lost": sum(g["lost"] or 0 for g in account.values()),
        "in_doubt": sum(g["in_doubt"] for g in account.values()),
    }
    groups = {group: spec["topic"] for group, spec in r.groups.items()}
    info.update(totals=totals, account=account, recovered_from="journal")
    info.update(load_started=r.load_started, topics=list(r.topics), groups=groups)
    write_run_json(run_dir, info)
    journal.unlink()
    for tail in tail_files(run_dir):
        tail.unlink()
    return notes + compact_parts(run_dir / "metrics")
