"""The coordinator's own cost at 16, 256 and 1,024 workers: the real run loop, fake workers in a process of their own.

Per size, a fresh child process runs dimster's `Coordinator` (dimster/coordinator/loop/run.py) with a control
API as `dimster run` has, on the in-memory cluster of the run-loop tests (tests/fake_run.py) and with
`ScaleWorkers` (scale_workers.py): N workers of 30 clients each (half of them producers, half share
consumers), each reporting every second, spread over the second (`--aligned`: all at once). The
workload has max(1, N/16, N x clients/480) topics, so that 64 reports of 480 clients (what 64 agents
of 16 workers would send as one report each) spread over as many topics as 1,024 reports of 30; half
the clients are producers, spread evenly over the topics, with as many consumers in one group each.
The reports are made in a process of their own, as agents make them on their hosts, and reach the
loop through a pipe as bytes (since 2026-12-04: before, the loop's own thread made them, and their
CPU was subtracted). The figures come from the run's own `coordinator` record in run.json
(dimster/coordinator/account/self_cost.py): its process's CPU over the load as a share of one core
(the reports' decoding is in it: `RemoteWorkers` decodes on the loop's thread too; the agents' side
of the clock probes, made on the loop's thread, is not), the report lag (a report's end to its
handling) and the console lag (a line's due time to its printing).

    .venv/bin/python scripts/bench/coordinator_scale.py [--workers 16,256,1024] [--seconds 90]
        [--clients-per-worker 30] [--aligned] [--workers-per-agent K] [--profile PREFIX] [--rss-every S]
        [--json-out F]

`--rss-every S` (10): the coordinator process's RSS every S seconds of the run, in the JSON's `rss_mb_curve`.

`--workers-per-agent K`: the workers run on N/K agents (worker i on agent i mod N/K, as `RemoteWorkers`
places them), each sending one report a second for its K workers (protocol 20, remote/report_hold.py);
building and merging them is the agents' work, in the agents' process.

A run may have 100,000 clients: 4,096 workers take `--clients-per-worker 24`.

`--profile PREFIX` writes a cProfile of the loop's thread over the load (StartLoad to StopProducers) per
size to PREFIX-<N>.prof; a profiled run's figures are inflated by the profiler: measure without it.
"""

import argparse
import cProfile
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests/fake_run.py: the run-loop tests' in-memory cluster


def workload_of(workers: int, clients_per_worker: int, seconds: float) -> dict:
    """N workers of `clients_per_worker` each: half producers, half share consumers, 16 workers (or 480
    clients) a topic."""
    topics = max(1, workers // 16, workers * clients_per_worker // 480)
    per_topic, rest = divmod(clients_per_worker * workers // 2, topics)
    if rest or clients_per_worker * workers % 2:
        sys.exit(f"{workers} workers of {clients_per_worker} clients do not split evenly over {topics} topic(s)")
    return {
        "name": f"scale-{workers}",
        "topics": topics,
        "partitionsPerTopic": 6,
        "producersPerTopic": per_topic,
        "groupsPerTopic": 1,
        "consumersPerGroup": per_topic,
        "producerRate": 10 * per_topic * topics,  # what ScaleWorkers sends: 10 records/s per producer
        "messageSize": 1024,
        "durationSeconds": seconds,
        "reportIntervalSeconds": 1,
        "drainTimeoutSeconds": 30,
    }


def run_child(args: argparse.Namespace) -> dict:
    """One size, in this process: the run, then its figures."""
    folder = Path(tempfile.mkdtemp(prefix="dimster-coordinator-scale-"))
    os.environ["DIMSTER_STATE_DIR"] = str(folder / "state")  # the control API's state file

    from coordinator_memory import large_allocations_off_the_heap
    from scale_workers import ScaleWorkers

    from dimster.coordinator.control.api import ControlServer
    from dimster.coordinator.loop.failures import RunFailed
    from dimster.coordinator.loop.run import Coordinator
    from dimster.results.bundle import ResultsBundle
    from dimster.workload.model import Workload
    from tests.fake_run import FakeKafka, fake_cluster

    if args.off_the_heap:
        large_allocations_off_the_heap()  # an experiment (coordinator_memory.py)
    n = args.workers
    workload = Workload.model_validate(workload_of(n, args.clients_per_worker, args.seconds))
    bundle = ResultsBundle(folder / "results", workload.name)
    bundle.start(workload=workload.to_yaml_dict(), environment={}, broker_config={}, kafka_version="4.3.1", run_id="r")
    profiler = cProfile.Profile() if args.profile else None
    fake = ScaleWorkers(rate=10, aligned=args.aligned, profiler=profiler, per_agent=args.workers_per_agent)
    control = ControlServer("scale-bench")
    control.start({"run_id": None, "results": None, "workload": workload.name, "phase": "starting"})
    publishing: list[float] = []  # seconds each status took to publish (masked and encoded), every 0.25 s
    publish = control.publish_status

    def timed_publish(status: dict) -> None:
        began = time.perf_counter()
        publish(status)
        publishing.append(time.perf_counter() - began)

    control.publish_status = timed_publish  # type: ignore[method-assign]
    lines: list[str] = []  # the console lines of the load (those of the drain after it are not timed)

    def say(line: str) -> None:
        if fake.measuring:
            lines.append(line)

    coordinator = Coordinator(
        workload, fake_cluster(), bundle, fake, n, control=control, say=say, kafka=FakeKafka(fake)
    )
    started = time.monotonic()
    rss_curve = sample_rss(args.rss_every, until := threading.Event())
    failure = None
    try:
        coordinator.run()
    except RunFailed as e:  # its figures are measured all the same (a fake fleet fallen behind, 4,096 workers)
        failure = str(e)
    finally:
        until.set()
        if profiler:
            profiler.dump_stats(f"{args.profile}-{n}.prof")
        control.close()
        fake.close()
    info = json.loads((bundle.path / "run.json").read_text())
    shutil.rmtree(folder, ignore_errors=True)  # the figures are read; the bundle of a fake run is no result
    cost = info["coordinator"]
    wall = fake.measured_seconds  # StartLoad to StopProducers: what self_cost measures, to one loop pass
    net = cost["cpu_seconds"] - fake.own_cpu_seconds
    return {
        "workers": n,
        "clients": sum(len(p) + len(fake.consumers[i]) for i, p in fake.producers.items()),
        "aligned": args.aligned,
        "load_seconds": round(wall, 2),
        "run_seconds": round(time.monotonic() - started, 2),
        "workers_per_agent": args.workers_per_agent,
        "reports": fake.reports,
        "worker_lines": fake.lines,
        "worker_lines_made": fake.lines_made,  # by the fake workers that closed, each of their reports
        "workers_closed": len(fake.closed),  # those that told what they made
        "worker_lines_taken": fake.lines_taken,  # by the coordinator over the whole run
        "report_kb": round(fake.wire_bytes / max(1, fake.reports) / 1000, 1),
        "fake_cpu_seconds": round(fake.own_cpu_seconds, 3),
        "coordinator_cpu_seconds": round(net, 3),
        "share_of_one_core": round(net / wall, 4) if wall else None,
        "share_per_worker": round(net / wall / n, 6) if wall else None,
        "us_per_report": round(1e6 * net / fake.reports, 1) if fake.reports else None,
        "report_lag_ms": cost["report_lag_ms"],
        "console_lag_ms": cost["console_lag_ms"],
        "console_lines": len([line for line in lines if line.startswith("[")]),
        "status_publish_ms": {
            "count": len(publishing),
            "p50": round(1e3 * statistics.median(publishing), 2) if publishing else None,
            "max": round(1e3 * max(publishing), 2) if publishing else None,
        },
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rss_mb_curve": rss_curve,  # [seconds since the run began, RSS in MB], every --rss-every s
        "as_measured": cost,  # run.json's record: the process's CPU, the agents' side of the clock probes included
        "totals": {k: info["totals"].get(k) for k in ("sent", "acked", "received", "lost", "unconsumed", "in_doubt")},
        "status": info["status"],
        "failure": failure,
    }


def sample_rss(every: float, until: threading.Event) -> list[list[float]]:
    """This process's RSS every `every` seconds from now until `until` is set, into the list returned
    (the run's memory over its length: loop, writer and journal, which the aggregate's curve leaves out)."""
    curve: list[list[float]] = []
    page_mb, began = os.sysconf("SC_PAGE_SIZE") / 2**20, time.monotonic()

    def sample() -> None:
        while True:
            pages = int(Path("/proc/self/statm").read_text().split()[1])
            curve.append([round(time.monotonic() - began, 1), round(pages * page_mb)])
            if until.wait(every):
                return

    threading.Thread(target=sample, name="rss-sampler", daemon=True).start()
    return curve


def load_average() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="16,256,1024", help="sizes, comma-separated (one child process each)")
    parser.add_argument("--clients-per-worker", type=int, default=30)
    parser.add_argument(
        "--seconds",
        type=float,
        default=90,
        help="of load (durationSeconds); 90: a minute's merge behind the writer included",
    )
    parser.add_argument("--aligned", action="store_true", help="every worker reports at the same moment")
    parser.add_argument(
        "--workers-per-agent", type=int, default=1, help="K: agents of K workers, each sending one report for them"
    )
    parser.add_argument("--profile", help="cProfile of the loop's thread to PREFIX-<workers>.prof")
    parser.add_argument(
        "--off-the-heap", action="store_true", help="every allocation above 128 KiB on pages of its own (glibc)"
    )
    parser.add_argument("--rss-every", type=float, default=10.0, help="seconds between RSS samples (rss_mb_curve)")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.workers = int(args.workers)
        print(json.dumps(run_child(args)))
        return
    rows = []
    for n in [int(size) for size in args.workers.split(",")]:
        command = [sys.executable, __file__, "--child", "--workers", str(n), "--seconds", str(args.seconds)]
        command += ["--clients-per-worker", str(args.clients_per_worker)] + (["--aligned"] if args.aligned else [])
        command += ["--workers-per-agent", str(args.workers_per_agent), "--rss-every", str(args.rss_every)]
        command += ["--profile", args.profile] if args.profile else []
        command += ["--off-the-heap"] if args.off_the_heap else []
        before = load_average()
        child = subprocess.run(command, capture_output=True, text=True, timeout=10 * args.seconds + 600)
        if child.returncode:
            if args.json_out:  # the sizes measured so far are kept
                args.json_out.write_text(json.dumps(rows, indent=2))
            sys.exit(f"{n} workers: the run failed:\n{child.stderr[-3000:]}")
        row = {**json.loads(child.stdout.splitlines()[-1]), "load_average_before": before}
        rows.append(row)
        lag, line = row["report_lag_ms"], row["console_lag_ms"]
        print(
            f"{n:>5} workers ({row['clients']:,} clients): {100 * row['share_of_one_core']:.1f}% of one core "
            f"({1e4 * row['share_per_worker']:.2f}% per 100 workers, {row['us_per_report']} µs per report of "
            f"{row['worker_lines'] / max(1, row['reports']):.0f} worker(s)); "
            f"report lag p50/p99/max {lag['p50']}/{lag['p99']}/{lag['max']} ms; console lag p50/max "
            f"{line['p50']}/{line['max']} ms; a status published in {row['status_publish_ms']['p50']} ms "
            f"(median of {row['status_publish_ms']['count']}); workers' reports made {row['worker_lines_made']:,} "
            f"(told by {row['workers_closed']:,} of {n:,} at their close), "
            f"taken {row['worker_lines_taken']:,}; lost {row['totals']['lost']}, in doubt "
            f"{row['totals']['in_doubt']}; {row['failure'] or row['status']}; "
            f"load average before {before}",
            flush=True,
        )
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
