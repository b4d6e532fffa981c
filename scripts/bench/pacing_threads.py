"""The interpreter's share of several producers' publish-delay tail, without Kafka: N producers' pacing
(dimster's Pacer, sends replaced by nothing) each on a thread of its own, as a worker paced them until
2026-12-06, against all N as members of one PacingLoop (dimster/worker/clients/pacing.py), as it paces
them now. Per case: every record's delay from its intended time to its pass (p50, p99, max), and the
process's CPU over the case.

    .venv/bin/python scripts/bench/pacing_threads.py --producers 4 --rates 10000,100000,250000 \\
        --seconds 5 --repeat 3 [--json-out pacing_threads.json]

Cases alternate within each round; the host's load average is recorded before each."""

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
from common import alternating  # beside this script

from dimster.worker import clock
from dimster.worker.clients.pacing import LONGEST_PAUSE_S, PacingLoop
from dimster.workload.schedule import Pacer


class Paced:
    """One producer's pacing: its pass takes what fell due and keeps each record's delay."""

    def __init__(self, rate: float, start: float):
        self.rate, self.pacer, self.delays = rate, Pacer(start), []

    def run_pass(self, until: float = float("inf")) -> float:
        due = self.pacer.due(min(clock.now(), until), self.rate, limit=20_000)
        if due:
            self.delays.append(np.maximum(clock.now() - np.array(due), 0.0) * 1e6)
        return self.pacer.next_due(self.rate)

    def recorded(self) -> np.ndarray:
        return np.concatenate(self.delays) if self.delays else np.zeros(0)


def own_thread(paced: Paced, until: float) -> None:
    """As ProducerClient paced before the loop: pass, then wait until the next record is due."""
    wake = threading.Event()
    while clock.now() < until:
        pause = paced.run_pass(until) - clock.now()
        if pause > 0:
            wake.wait(min(pause, LONGEST_PAUSE_S))


def run_case(case: dict, seconds: float) -> dict:
    start = clock.now()
    members = [Paced(case["rate"] / case["producers"], start) for _ in range(case["producers"])]
    load = os.getloadavg()
    cpu = time.process_time()
    if case["pacing"] == "thread each":
        threads = [threading.Thread(target=own_thread, args=(m, start + seconds)) for m in members]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        loop, until = PacingLoop("pacing-bench"), start + seconds
        for m in members:
            loop.join(m, lambda m=m: m.run_pass(until), lambda e: None)
        time.sleep(max(0.0, start + seconds - clock.now()))
        for m in members:
            loop.leave(m)
    passed_before_the_end = sum(len(m.recorded()) for m in members)
    for m in members:  # what fell due since a member's last pass, up to the case's end (on a busy
        m.run_pass(until=start + seconds)  # host that pass may have come long before it)
    cpu = time.process_time() - cpu
    delays = np.concatenate([m.recorded() for m in members])
    return {
        **case,
        "load_average_before": [round(x, 2) for x in load],
        "records": len(delays),
        "records_passed_before_the_end": passed_before_the_end,
        "expected": int(case["rate"] * seconds),
        "delay_p50_us": float(np.percentile(delays, 50)),
        "delay_p99_us": float(np.percentile(delays, 99)),
        "delay_max_us": float(delays.max()),
        "cpu_of_a_core": cpu / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--rates", default="10000,100000", help="msg/s of all the producers together")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    cases = [
        {"pacing": pacing, "producers": args.producers, "rate": float(rate)}
        for rate in args.rates.split(",")
        for pacing in ("thread each", "one loop")
    ]
    results = alternating(cases, args.repeat, lambda case: run_case(case, args.seconds))
    for r in results:
        print(
            f"{r['pacing']:>11}, {r['producers']} producers, {r['rate']:>9,.0f} msg/s: {r['records']:,} records "
            f"of {r['expected']:,}, delay p50 {r['delay_p50_us']:.0f} µs, p99 {r['delay_p99_us']:.0f} µs, "
            f"max {r['delay_max_us']:.0f} µs; {r['cpu_of_a_core']:.2f} of a core"
        )
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
