"""Whether bursts of concurrent `status` calls delay a run's console lines (issue 17: 100 concurrent
calls may delay them by at most a second).

Starts a scratch one-node cluster and a small share-group run in the foreground with a console line
every second, and reads its stdout line by line, noting each line's arrival (time.monotonic()). At a
few moments of the run it fires a burst of concurrent `GET /status` calls at the run's control API,
as `dimster status` does (port and token from the run's state file), from a child process so that
the calls do not hold up the line reader. For each status line, its delay is its arrival minus the
arrival the cadence expects (the previous line + the interval). The script reports the largest delay
of the lines whose interval overlapped a burst, against the largest of the others, and the calls'
latency and HTTP statuses. Everything it starts it stops: the run ends by itself, the cluster with
`dimster cluster down`.

    .venv/bin/python scripts/bench/status_burst.py [--bursts 3] [--calls 100] [--seconds 40] [--json-out F]
"""

import argparse
import collections
import http.client
import itertools
import json
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from common import DIMSTER, ROOT, dimster, free_block, percentile

ENV_NAME = "benchstatus"
CALL_TIMEOUT = 30  # seconds, as `dimster status` waits
LEAD = 0.1  # seconds between a burst and the next line's due time
STATUS_LINE = re.compile(r"^\[\s*(\d+)s(?:/\d+s)? (\w+)\s*\]")  # console.status_line: "[    12s/60s measure] pub ..."


def one_call(port: int, token: str, header: str) -> dict:
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT)
    try:
        connection.request("GET", "/status", headers={header: token})
        answer = connection.getresponse()
        body = json.loads(answer.read())
        code = answer.status
    except (OSError, http.client.HTTPException, ValueError) as e:
        body, code = {"error": f"{type(e).__name__}: {e}"}, 0
    finally:
        connection.close()
    ended = time.monotonic()
    return {"start": started, "end": ended, "status": code, **{k: body.get(k) for k in ("runId", "sent", "error")}}


def fire_burst(index: int, moment: float, address: tuple, calls: int, out: multiprocessing.Queue) -> None:
    """In a child process: `calls` threads, released together at `moment` (time.monotonic(), the same
    clock in every process), each one GET /status; the answers go to `out`."""
    barrier = threading.Barrier(calls + 1)
    results: list[dict] = []

    def call() -> None:
        barrier.wait()
        results.append(one_call(*address))

    threads = [threading.Thread(target=call) for _ in range(calls)]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, moment - time.monotonic()))
    barrier.wait()
    for thread in threads:
        thread.join()
    out.put((index, results))


def analyse(lines: list[tuple[float, str]], bursts: list[dict], interval: float) -> dict:
    status = [(at, text) for at, text in lines if STATUS_LINE.match(text)]
    load = [(at, text) for at, text in status if STATUS_LINE.match(text)[2] in ("warmup", "measure")]
    delays = []  # the lines of the load phase: the drain's start their cadence anew
    for (before, _), (at, text) in itertools.pairwise(load):
        met = [b["index"] for b in bursts if b["start"] <= at and b["end"] >= before]  # its interval met a burst
        delays.append({"line": text[:24], "at": at, "delay": at - (before + interval), "bursts": met})
    during = [d["delay"] for d in delays if d["bursts"]]
    outside = [d["delay"] for d in delays if not d["bursts"]]
    calls = [c for b in bursts for c in b["calls"]]
    latencies = [c["end"] - c["start"] for c in calls]
    codes = collections.Counter(str(c["status"]) for c in calls)
    errors = collections.Counter(c["error"] for c in calls if c["status"] != 200)
    return {
        "status_lines": len(status),
        "delay_max_during_bursts_s": max(during, default=None),
        "delay_max_outside_bursts_s": max(outside, default=None),
        "delay_median_outside_bursts_s": statistics.median(outside) if outside else None,
        "per_burst": [
            {
                "burst": b["index"],
                "calls": len(b["calls"]),
                "span_s": b["end"] - b["start"],
                "line_delay_max_s": max((d["delay"] for d in delays if b["index"] in d["bursts"]), default=None),
                "latency_max_s": max(c["end"] - c["start"] for c in b["calls"]),
                "not_200": sum(c["status"] != 200 for c in b["calls"]),
            }
            for b in bursts
        ],
        "latency_s": {
            "p50": percentile(latencies, 0.5),
            "p99": percentile(latencies, 0.99),
            "max": max(latencies),
        },
        "http_status": dict(codes),
        "errors": dict(errors),
        "delays": delays,
        "calls": [{"burst": b["index"], **c} for b in bursts for c in b["calls"]],
        "lines": lines,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--calls", type=int, default=100, help="concurrent status calls per burst")
    parser.add_argument("--seconds", type=int, default=40, help="durationSeconds of the run")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="dimster-status-bench-"))
    project = folder / "project"
    shutil.copytree(ROOT / "run", project / "run")
    state = folder / "state"
    env = {
        **os.environ,
        "DIMSTER_PROJECT_DIR": str(project),
        "DIMSTER_STATE_DIR": str(state),
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "400",  # one console line per status line
    }
    os.environ["DIMSTER_STATE_DIR"] = str(state)  # read_run_state below reads the scratch state
    from dimster.coordinator.control.run_state import TOKEN_HEADER, read_run_state

    base = free_block(20)
    cluster = {"backend": "local", "nodes": 1, "heap": "1g", "brokerPortBase": base, "controllerPortBase": base + 10}
    (project / "run" / "environments" / f"{ENV_NAME}.yaml").write_text(yaml.safe_dump(cluster))
    interval = 1.0
    workload = folder / "status-burst.yaml"
    workload.write_text(
        yaml.safe_dump(
            {
                "name": "status-burst",
                "partitionsPerTopic": 3,
                "messageSize": 256,
                "producersPerTopic": 1,
                "producerRate": 500,
                "consumerType": "SHARE_GROUP",
                "consumersPerGroup": 2,
                "warmupSeconds": 2,
                "durationSeconds": args.seconds,
                "reportIntervalSeconds": interval,
                "drainTimeoutSeconds": 30,
                "kafkaConfig": {"producerConfig": {"linger.ms": 5}},
            }
        )
    )
    up = dimster(env, "cluster", "up", ENV_NAME)
    if up.returncode:
        shutil.rmtree(folder, ignore_errors=True)
        sys.exit(up.stderr)
    lines: list[tuple[float, str]] = []
    bursts: list[dict] = []
    run = None
    try:
        command = [*DIMSTER, "run", ENV_NAME, "-w", str(workload), "--results", str(folder / "results"), "--no-summary"]
        run = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def read() -> None:
            for text in run.stdout:
                lines.append((time.monotonic(), text.rstrip("\n")))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + 180
        while not any(STATUS_LINE.match(text) for _, text in lines):
            if run.poll() is not None or time.monotonic() > deadline:
                sys.exit("the run printed no status line:\n" + "\n".join(text for _, text in lines[-20:]))
            time.sleep(0.05)
        first = next(at for at, text in lines if STATUS_LINE.match(text))
        run_state = read_run_state(ENV_NAME)
        if run_state is None:
            sys.exit("no run state for the run")
        # bursts spread over the load, each released LEAD s before a line is due (lines come on the
        # cadence of the first), so that the run handles the burst when it should print the line; one
        # child process each, started now, so that a slow burst does not hold up the next
        moments = [first + round((i + 1) * args.seconds / (args.bursts + 1)) - LEAD for i in range(args.bursts)]
        address = (run_state["port"], run_state["token"], TOKEN_HEADER)
        spawn = multiprocessing.get_context("spawn")
        out = spawn.Queue()
        children = [
            spawn.Process(target=fire_burst, args=(index, moment, address, args.calls, out))
            for index, moment in enumerate(moments, 1)
        ]
        for child in children:
            child.start()
        for _ in children:
            index, calls = out.get(timeout=args.seconds + CALL_TIMEOUT + 60)
            answered = [c for c in calls if c["status"] == 200] or calls
            # the burst's load on the run: from the first call to the last one answered
            window = {"start": min(c["start"] for c in calls), "end": max(c["end"] for c in answered)}
            bursts.append({"index": index, **window, "calls": calls})
        for child in children:
            child.join()
        bursts.sort(key=lambda b: b["index"])
        code = run.wait(timeout=args.seconds + 180)
        reader.join(10)
    finally:
        if run is not None and run.poll() is None:
            run.terminate()
            run.wait(60)
        dimster(env, "cluster", "down", ENV_NAME, "--purge")

    result = analyse(lines, bursts, interval)
    result["run_exit_code"] = code
    result["run_end"] = [text for _, text in lines if "lost" in text or "run completed" in text][-3:]
    fmt = lambda v: "-" if v is None else f"{1000 * v:.0f} ms"  # noqa: E731
    print(f"{result['status_lines']} status lines; run exit code {code}")
    for b in result["per_burst"]:
        print(
            f"burst {b['burst']}: {b['calls']} calls ({b['not_200']} not answered 200) over {fmt(b['span_s'])}; "
            f"slowest call {fmt(b['latency_max_s'])}; "
            f"largest line delay in it {fmt(b['line_delay_max_s'])}"
        )
    print(
        f"console line delay (arrival - previous line - {interval:g} s): max during bursts "
        f"{fmt(result['delay_max_during_bursts_s'])}, max outside {fmt(result['delay_max_outside_bursts_s'])} "
        f"(median outside {fmt(result['delay_median_outside_bursts_s'])})"
    )
    lat = result["latency_s"]
    print(
        f"status call latency: p50 {fmt(lat['p50'])}, p99 {fmt(lat['p99'])}, max {fmt(lat['max'])}; "
        f"HTTP status {result['http_status']}"
    )
    for error, count in result["errors"].items():
        print(f"  {count} x {error}")
    for text in result["run_end"]:
        print(text)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
