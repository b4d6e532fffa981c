"""How well dimster keeps its producers' schedule: the produced rate's error against the intended one
and the publish delay (intended send time to the record handed to the client), by rate, client
library and producers a worker, and across a live `--modify` of the rate.

Each case is a `dimster run` of producers only (no consumer group: nothing else in the worker) on
ENV, one worker, read back from its own bundle: per 1-s worker report of the measured phase, the records sent
against the target rate over the time the report covered (the worst second and the 99th percentile of
the seconds' errors), the same over the whole measured phase, and the publish delay's p50, p99 and
max from the producers' histograms, and the worker's CPU over the seconds judged (`worker_cores`: what
the load generator cost). With `--modify`, the rate moves from the case's rate to
`--modify-to` times it half-way through; the report that spans the change is left out (its target is
neither), and the seconds after it are judged against the new rate. With `--pin no,yes`, each case runs
also with ENV's brokers on the host's last core and the dimster run (coordinator and worker) on the
others (Linux affinity, every thread; taken back after the run), to tell the load generator's share
of a tail from the broker's on a host of few cores.

    .venv/bin/python scripts/bench/pacing.py --rates 1000,10000,50000 --libraries librdkafka,java \\
        --producers 1,4 --seconds 20 --repeat 3 [--warmups 3,30] [--modify] [--pin no,yes] [--json-out pacing.json]

The host's load average is recorded before each run. Cases alternate within each round."""

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import yaml
from common import ROOT, alternating  # beside this script

from dimster.metrics.histogram import Histogram


def workload(name: str, rate: float, producers: int, library: str, seconds: int, size: int, warmup: int) -> dict:
    return {
        "name": name,
        "topics": 1,
        "partitionsPerTopic": max(producers, 2),
        "messageSize": size,
        "producersPerTopic": producers,
        "producerRate": rate,
        "groupsPerTopic": 0,  # producers only: nothing else in the worker takes the GIL or a core
        "warmupSeconds": warmup,
        "durationSeconds": seconds,
        "reportIntervalSeconds": 5,
        "drainTimeoutSeconds": 10,
        "clientLibrary": {"producer": library},
    }


def pin_threads(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` on `cpus` (threads it starts later inherit their starter's)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # the thread ended meanwhile
            os.sched_setaffinity(int(task.name), cpus)


def broker_pids(env: str) -> list[int]:
    status = json.loads(dimster("cluster", "status", env, "--json").stdout)
    return [node["pid"] for node in status["nodes"] if node.get("pid")]


def dimster(*args: str, check: bool = True, cpus: set[int] | None = None) -> subprocess.CompletedProcess:
    def on_cpus() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)

    command = [sys.executable, "-m", "dimster", *args]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, preexec_fn=on_cpus)
    if check and done.returncode:
        sys.exit(f"dimster {' '.join(args[:2])} failed:\n{done.stderr[-2000:]}")
    return done


def run_case(env: str, case: dict, args: argparse.Namespace, folder: Path) -> dict:
    pinned = "-pinned" if case["pinned"] else ""
    name = f"pacing-{case['library']}-{case['producers']}p-{int(case['rate'])}-w{case['warmup']}{pinned}"
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(workload(name, case["rate"], case["producers"], case["library"], args.seconds,
                                            args.message_size, case["warmup"])))  # fmt: skip
    results = folder / "results"
    if not case["pinned"]:
        return {**case, **measured(env, case, args, path, results, None)}
    every_cpu = set(range(os.cpu_count() or 1))
    brokers = broker_pids(env)
    for pid in brokers:
        pin_threads(pid, {max(every_cpu)})
    try:
        return {**case, **measured(env, case, args, path, results, every_cpu - {max(every_cpu)})}
    finally:
        for pid in brokers:
            pin_threads(pid, every_cpu)


def measured(env: str, case: dict, args: argparse.Namespace, path: Path, results: Path, cpus: set[int] | None) -> dict:
    before = os.getloadavg()
    modified_at = None
    if args.modify:
        dimster("run", env, "-w", str(path), "--results", str(results), "--no-summary", "--detach", cpus=cpus)
        dimster("wait", env, "--until", f"elapsedSeconds>={case['warmup'] + args.seconds / 2}", "--timeout", "300")
        new_rate = case["rate"] * args.modify_to
        dimster("run", env, "--modify", "--set", f"producerRate={new_rate:g}")
        modified_at = time.time()
        deadline = time.monotonic() + args.seconds + 300
        while dimster("status", env, check=False).returncode == 0:  # until the run has ended
            if time.monotonic() > deadline:
                sys.exit(f"{path.stem}: the run did not end within {args.seconds + 300} s")
            time.sleep(1)
    else:
        dimster("run", env, "-w", str(path), "--results", str(results), "--no-summary", cpus=cpus)
    bundle = max(results.iterdir(), key=lambda p: p.stat().st_mtime)
    return {"load_average_before": [round(x, 2) for x in before], **judged(bundle, modified_at)}


def judged(bundle: Path, modified_at: float | None) -> dict:
    """The bundle's producers: rate errors per report and over the measured phase, publish delays."""
    intervals = pq.read_table(bundle / "metrics" / "intervals").to_pandas()
    producers = intervals[intervals.role == "producer"]
    by_report = producers.groupby(["worker", "end_time", "phase"], as_index=False).agg(
        sent=("sent", "sum"), target=("target_rate", "sum")
    )
    by_report = by_report.sort_values("end_time")
    by_report["span"] = by_report.groupby("worker").end_time.diff()  # from the worker's report before
    by_report = by_report[by_report.phase == "measure"].dropna()
    producers = producers[producers.phase == "measure"]
    if modified_at is not None:  # the report whose span holds the change has no one target
        spans_change = (by_report.end_time - by_report.span <= modified_at) & (by_report.end_time >= modified_at)
        by_report = by_report[~spans_change]
    intended = by_report.target * by_report.span
    errors = ((by_report.sent - intended).abs() / intended).to_numpy()
    total_error = abs(by_report.sent.sum() - intended.sum()) / intended.sum()
    workers = pq.read_table(bundle / "metrics" / "workers").to_pandas()
    cpu = workers[workers.end_time.isin(by_report.end_time)].cpu_seconds.sum()  # over the reports judged
    histograms = pq.read_table(bundle / "metrics" / "histograms").to_pandas()
    delays = histograms[(histograms.metric == "publish_delay") & (histograms.phase == "measure")]
    counts = delays.groupby("bucket")["count"].sum()
    merged = Histogram.from_wire(
        ({int(b): int(c) for b, c in counts.items()}, int(counts.sum()), delays.hist_min.min(), delays.hist_max.max())
    )

    def ms(q: float) -> float | None:
        value = merged.percentile(q)
        return None if value is None else round(value / 1000, 3)

    return {
        "seconds_judged": len(errors),
        "rate_error_worst_second": round(float(errors.max()), 5) if len(errors) else None,
        "rate_error_p99_second": round(float(np.percentile(errors, 99)), 5) if len(errors) else None,
        "rate_error_run": round(float(total_error), 6),
        "publish_delay_ms": {"p50": ms(50), "p99": ms(99), "max": ms(100)},
        "worker_cores": round(float(cpu / by_report.span.sum()), 3) if len(errors) else None,  # the generator's CPU
        "sent": int(producers.sent.sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="local")
    parser.add_argument("--rates", default="1000,10000")
    parser.add_argument("--libraries", default="librdkafka,java")
    parser.add_argument("--producers", default="1", help="producers a worker (one worker), comma-separated")
    parser.add_argument("--seconds", type=int, default=20, help="of the measured phase")
    parser.add_argument("--message-size", type=int, default=256)
    parser.add_argument("--warmups", default="3", help="seconds of warm-up before the measured phase, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modify", action="store_true", help="change the rate live half-way through")
    parser.add_argument("--modify-to", type=float, default=0.5, help="the new rate, as a share of the case's")
    parser.add_argument("--pin", default="no", help="no, yes or no,yes: brokers on a core of their own")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    cases = [
        {"rate": float(rate), "library": library, "producers": int(producers), "warmup": int(warmup), "pinned": pin}
        for pin in [{"no": False, "yes": True}[word] for word in args.pin.split(",")]
        for warmup in args.warmups.split(",")
        for rate in args.rates.split(",")
        for library in args.libraries.split(",")
        for producers in args.producers.split(",")
    ]
    folder = Path(tempfile.mkdtemp(prefix="dimster-pacing-"))
    rows = alternating(cases, args.repeat, lambda case: run_case(args.env, case, args, folder))
    for case in cases:
        mine = [r for r in rows if all(r[k] == v for k, v in case.items())]
        worst = statistics.median(r["rate_error_worst_second"] for r in mine)
        run = statistics.median(r["rate_error_run"] for r in mine)
        p99 = statistics.median(r["publish_delay_ms"]["p99"] for r in mine)
        cores = statistics.median(r["worker_cores"] for r in mine)
        pinned = ", brokers on a core of their own" if case["pinned"] else ""
        print(f"{case['library']:10} {case['producers']} producer(s) at {case['rate']:>9,.0f} msg/s after "
              f"{case['warmup']} s of warm-up{pinned}: worst second "
              f"{worst:.2%}, run {run:.3%}, publish delay p99 {p99} ms, the worker {cores} of a core "
              f"(medians of {len(mine)})")  # fmt: skip
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
