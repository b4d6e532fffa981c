"""The coordinator's memory over a long share-group run, in compressed time: its run aggregate
(dimster/coordinator/account/aggregate.py) fed reports that each cover `--report-seconds` of
simulated time (60 by default; a run's workers report every second, which costs 60 times the calls).

`--consumers` share consumers of one group settle what `--producers` producers send at `--rate`
records/s in all; `--reject` of the records (default 5 %, at random) are rejected on their first
delivery, and `--release` (default 5 %) released, to come back to another consumer on delivery 2,
where they are accepted. Each report interval every consumer reports once (its settled range, its
rejected records, the records it received again) and every producer once. After each minute the
process's resident memory is printed, so the curve shows whether the aggregate's memory follows the
run's length or stays with its clients. The aggregate folds long-settled records as a run's does
(coordinator/account/outcome_folds.py, the horizon of a `--lock-ms` lock); `--keep-all` keeps every
record, as dimster did before. `--feed-process` makes the reports in a process of its own (the same
reports, from the same seed), so that a long curve takes the aggregate's time, not the two's added.

    .venv/bin/python scripts/bench/coordinator_memory.py [--minutes 10] [--rate 1000000] [--reject 0.05]
        [--release 0.05] [--producers 64] [--consumers 64] [--lock-ms 30000] [--report-seconds 60]
        [--keep-all] [--trim] [--feed-process] [--json-out F]
"""

import argparse
import ctypes
import json
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
from common import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dimster.coordinator.account.aggregate import RunAggregate
from dimster.coordinator.account.outcome_folds import horizon_for
from dimster.metrics.sequences import to_ranges
from dimster.worker.protocol import ClientInterval, IntervalReport, worker_report

SEED = 48
M_MMAP_THRESHOLD = -3  # glibc's malloc.h
PR_SET_PDEATHSIG = 1  # Linux's prctl.h


def interval_reports(interval: int, args: argparse.Namespace, rng: np.random.Generator) -> list[IntervalReport]:
    """A simulated report interval: each producer's sends; each consumer settles one producer's
    interval, but for the records it released, which the next consumer receives again (delivery 2)
    and accepts."""
    per_producer = int(args.rate * args.report_seconds / args.producers)
    first = interval * per_producer
    end = 100.0 + args.report_seconds * (interval + 1)
    sent = {"sent": per_producer, "acked": per_producer, "next_sequence": first + per_producer}
    producers = [ClientInterval(f"p{p}", "producer", "t", **sent) for p in range(args.producers)]
    consumers = [ClientInterval(f"c{c}", "share_consumer", "t", "g") for c in range(args.consumers)]
    for c, consumer in enumerate(consumers):
        producer = c % args.producers
        draws = rng.random(per_producer)
        rejected = np.flatnonzero(draws < args.reject) + first
        released = np.flatnonzero(draws > 1 - args.release) + first
        kept = np.flatnonzero(draws <= 1 - args.release) + first  # all but the released
        consumer.received += per_producer
        consumer.rejected, consumer.released = len(rejected), len(released)
        consumer.accepted += len(kept) - len(rejected)
        consumer.settled[producer] = to_ranges(kept)
        consumer.settled_rejected = {(producer, 1): to_ranges(rejected)}
        taker = consumers[(c + 1) % len(consumers)]  # receives them again and accepts them
        again = to_ranges(released)
        taker.received += len(released)
        taker.accepted += len(released)
        taker.received_again[(producer, 2)] = again
        taker.settled[producer] = taker.settled.get(producer, []) + again
    return [worker_report(0, end, producers), worker_report(1, end, consumers)]


def reports_made(args: argparse.Namespace) -> Iterator[list[IntervalReport]]:
    """Each report interval's reports, in order: made here, or with `--feed-process` in a process of
    their own, a few intervals ahead, and taken in through a pipe."""
    intervals = args.minutes * (60 // args.report_seconds)
    if not args.feed_process:
        rng = np.random.default_rng(SEED)
        for interval in range(intervals):
            yield interval_reports(interval, args, rng)
        return
    context = multiprocessing.get_context("fork")
    made = context.Queue(maxsize=4)
    maker = context.Process(target=_make_into, args=(made, args, intervals, os.getpid()), name="feed", daemon=True)
    maker.start()
    try:
        for _ in range(intervals):
            yield made.get()
    finally:
        maker.terminate()
        maker.join()


def _make_into(
    made: "multiprocessing.Queue[list[IntervalReport]]", args: argparse.Namespace, intervals: int, parent: int
) -> None:
    """The intervals' reports into `made`. Killed, the curve's process (`parent`) runs no `finally` that
    would end this one, and a maker waiting on a full queue, or at its exit on the pipe it holds both
    ends of, would wait for good: Linux ends it with its parent (PR_SET_PDEATHSIG)."""
    ctypes.CDLL("libc.so.6").prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above
        return
    rng = np.random.default_rng(SEED)
    for interval in range(intervals):
        made.put(interval_reports(interval, args, rng))


def ranges_kept(a: RunAggregate) -> tuple[int, int]:
    """The ranges the aggregate holds (the share group's outcomes and the settled records), and their
    arrays' bytes."""
    o = a.outcomes
    by_delivery = [s for by in (o.rejected_on, o.received_on, o.doubted_on) for d in by.values() for s in d.values()]
    held = [*o.sets.values(), *o.in_question.values(), *by_delivery, *a.settled.values()]
    return sum(len(ranges) for ranges in held), sum(ranges.nbytes() for ranges in held)


def no_replay():
    """A run replays its journal for a record that comes back after it was folded; here none does."""
    raise RuntimeError("a record came back after it was folded: the simulation is not what it claims")


def run_aggregate(args: argparse.Namespace) -> RunAggregate:
    """The aggregate of a run of the group "g" on topic "t", folding as a run's does (but `--keep-all`)."""
    aggregate = RunAggregate({"g": "t"})
    aggregate.load_started = 100.0
    if not args.keep_all:
        aggregate.outcomes.fold_beyond(horizon_for(args.lock_ms), replay=no_replay)
    return aggregate


HEAP_MOST = 128 * 1024  # bytes: a larger allocation gets pages of its own, given back when freed


def large_allocations_off_the_heap() -> bool:
    """Serve every allocation above HEAP_MOST from pages of its own (glibc's `mallopt`). Left as it
    is, glibc raises that bound to the largest block freed so far, the aggregate's range arrays move
    into its heap, and the pieces they leave there as they grow and shrink keep the RSS rising for an
    hour. An experiment, not dimster's setting: at 1,024 workers the coordinator then pays some 5 %
    more CPU (docs/benchmarks.md). True where it took effect."""
    return bool(ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, HEAP_MOST))


def trimmed_rss_mb(me: psutil.Process) -> int:
    """The resident memory once glibc's allocator has returned the free pages it keeps (malloc_trim):
    what the process holds, apart from what it freed and the allocator kept for later. Each trim
    changes the RSS of the minutes after it, hence `--trim` is a curve of its own."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return round(me.memory_info().rss / 2**20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=10, help="simulated minutes")
    parser.add_argument("--rate", type=float, default=1_000_000, help="records/s in all")
    parser.add_argument("--reject", type=float, default=0.05, help="share of records rejected on delivery 1")
    parser.add_argument("--release", type=float, default=0.05, help="share of records released on delivery 1")
    parser.add_argument("--producers", type=int, default=64)
    parser.add_argument("--consumers", type=int, default=64)
    parser.add_argument("--lock-ms", type=int, default=30_000, help="the group's record lock duration")
    parser.add_argument("--report-seconds", type=int, default=60, choices=[s for s in range(1, 61) if 60 % s == 0])
    parser.add_argument("--keep-all", action="store_true", help="fold nothing (every record kept)")
    parser.add_argument("--trim", action="store_true", help="also the RSS after malloc_trim, each minute (glibc)")
    parser.add_argument("--feed-process", action="store_true", help="make the reports in a process of their own")
    parser.add_argument(
        "--off-the-heap", action="store_true", help="every allocation above 128 KiB on pages of its own (glibc)"
    )
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    if args.off_the_heap:
        large_allocations_off_the_heap()
    me = psutil.Process()
    aggregate = run_aggregate(args)
    curve = [{"minute": 0, "rss_mb": round(me.memory_info().rss / 2**20), "seconds": 0.0}]
    print(f"minute 0: RSS {curve[0]['rss_mb']} MB", flush=True)
    per_minute = 60 // args.report_seconds
    made = reports_made(args)
    for minute in range(args.minutes):
        started = time.monotonic()
        for _ in range(per_minute):
            reports = next(made)
            for report in reports:
                aggregate.add(report)
        del reports, report  # the minute's reports are gone: what is measured is what the aggregate holds
        took = time.monotonic() - started
        blocks = sys.getallocatedblocks()
        rss = round(me.memory_info().rss / 2**20)
        live = trimmed_rss_mb(me) if args.trim else None
        rejected = aggregate.outcomes.count("rejected", "g")
        settled, duplicates = aggregate.settled_by_group["g"], aggregate.duplicates
        kept, size = ranges_kept(aggregate)
        point = {"minute": minute + 1, "rss_mb": rss, "trimmed_rss_mb": live, "seconds": round(took, 1)}
        point |= {"rejected": rejected, "ranges": kept, "ranges_mb": round(size / 2**20), "python_blocks": blocks}
        assert aggregate.outcomes.late == 0, "a folded record came back"
        curve.append(point | {"settled": settled, "acked": aggregate.acked, "duplicates": duplicates})
        print(
            f"minute {minute + 1}: RSS {rss} MB"
            + (f" ({live} MB once the allocator gave back its free pages)" if args.trim else "")
            + f", {took:.1f} s to take in; acked {aggregate.acked:,}, settled "
            f"{settled:,}, duplicates {duplicates}, rejected {rejected:,}; ranges held {kept:,} "
            f"({size / 2**20:.0f} MB); {blocks:,} blocks of Python's allocator in use",
            flush=True,
        )
        if args.json_out:  # after each minute: a curve stopped early keeps what it measured
            args.json_out.write_text(json.dumps({"args": vars(args) | {"json_out": None}, "curve": curve}, indent=2))


if __name__ == "__main__":
    main()
