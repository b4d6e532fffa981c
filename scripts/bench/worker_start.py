"""What starting a run's worker processes costs: spawned (each a fresh interpreter that imports the
worker's code) against forked from dimster's worker server (worker/process.py, `start_process`: one
server process imports it once, every worker forks from it).

For each count of workers and each way, the script starts that many processes at once from a fresh
parent, each running a target that imports `dimster.worker.process` (a no-op where it is already
imported) and sends back its own CPU time; it reports the time until every worker has answered and
the CPU of the workers and of the server (its imports) together.

    .venv/bin/python scripts/bench/worker_start.py --workers 1,4,16 --repeat 3
"""

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time

import psutil


def target(connection) -> None:
    import dimster.worker.process  # noqa: F401  the worker's code (already imported in a forked worker)

    connection.send(time.process_time())


def child(way: str, count: int) -> None:
    """One round, in a fresh process: `count` workers started at once, the way `way` says."""
    from dimster.worker.process import start_process  # the product's own way to start a worker

    spawn = multiprocessing.get_context("spawn")
    started = time.monotonic()
    pipes, processes = [], []
    for _ in range(count):
        ours, theirs = spawn.Pipe()
        if way == "server":
            process = start_process(target, (theirs,), "worker")
        else:
            process = spawn.Process(target=target, args=(theirs,))
            process.start()
        theirs.close()
        pipes.append(ours)
        processes.append(process)
    cpu = sum(pipe.recv() for pipe in pipes)
    answered = time.monotonic() - started
    for server in psutil.Process().children():  # the worker server, alive until this process ends
        with contextlib.suppress(psutil.Error):  # a spawned worker that has exited
            if "forkserver" in " ".join(server.cmdline()):
                times = server.cpu_times()
                cpu += times.user + times.system
    for process in processes:
        process.join()
    print(json.dumps({"seconds": answered, "cpu": cpu}))


def once(way: str, count: int) -> dict:
    command = [sys.executable, __file__, "--child", way, str(count)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,4,16", help="counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the medians are reported")
    parser.add_argument("--child", nargs=2, metavar=("WAY", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| workers | way | until all started (median) | CPU of workers and server (median) | CPU per worker |")
    print("|---:|---|---:|---:|---:|")
    for count in (int(n) for n in args.workers.split(",")):
        for way in ("spawn", "server"):
            rounds = [once(way, count) for _ in range(args.repeat)]
            seconds = statistics.median(r["seconds"] for r in rounds)
            cpu = statistics.median(r["cpu"] for r in rounds)
            print(f"| {count} | {way} | {seconds:.2f} s | {cpu:.2f} s | {cpu / count:.3f} s |")


if __name__ == "__main__":
    main()
