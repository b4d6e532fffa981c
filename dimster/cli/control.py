"""`dimster status`, `wait` and `stop`: scripts and a second terminal talking to a running workload."""

import contextlib
import math
import time

import typer

from dimster.cli.output import console, print_json
from dimster.clock import Deadline
from dimster.coordinator.control.console import dead_letter_counts, ms_text
from dimster.coordinator.control.run_state import control_request, read_run_state, wait_until
from dimster.errors import DimsterError
from dimster.processes import TrackedProcess

EnvArg = typer.Argument(..., help="Environment whose run to address.", show_default=False)


class WaitTimedOut(DimsterError):
    exit_code = 6


def status(env: str = EnvArg, json: bool = typer.Option(False, "--json", help="Machine-readable JSON.")) -> None:
    """Rates, totals, backlog, latencies and effective settings of the run of ENV."""
    s = control_request(env, "GET", "/status", timeout=30)
    if json:
        print_json(s)
        return
    console.print(f"run {s['runId']} on '{env}': {s['phase']}, {s['elapsedSeconds']:.0f}s, results {s['results']}")
    if s.get("metricsUrl"):
        console.print(f"metrics: {s['metricsUrl']}", markup=False)
    if c := s.get("campaign"):
        values = ", ".join(f"{k}={v}" for k, v in c["values"].items()) or "the base workload"
        repeat = f" repeat {c['repeat']}" if c["repeat"] > 1 else ""
        console.print(f"campaign {c['name']}: run {c['point']} of {c['points']}, point {c['index']}{repeat}: {values}")
    if s.get("mode", "steady") != "steady" or s.get("consumersPaused"):
        paused = " | consumers paused" if s.get("consumersPaused") else ""
        console.print(f"mode {s.get('mode')}{paused}")
    console.print(
        f"pub {s['pubRate']:,.0f} msg/s (target {s['targetRate']:,.0f}) | cons {s['consRate']:,.0f} msg/s | "
        f"sent {s['sent']:,} | received {s['received']:,} | backlog {s['backlog']:,} | duplicates {s['duplicates']:,}"
        + "".join(f" | {count}" for count in dead_letter_counts(s))
    )
    console.print(
        f"e2e p50 {ms_text(s['e2eP50Ms'])} p99 {ms_text(s['e2eP99Ms'])} | publish p99 {ms_text(s['publishP99Ms'])} | "
        f"{s['producers']} producer(s), {s['consumers']} consumer(s), brokers {s['brokers']}"
    )
    if s.get("batchRecordsAvg"):
        console.print(f"producer batches: {s['batchRecordsAvg']:.1f} records, {s['batchBytesAvg'] / 1024:.1f} KiB")
    if s.get("recordsPerPoll") is not None:
        console.print(f"consumer polls: {s['recordsPerPoll']:.1f} records on average, at most {s['maxPollRecords']}")
    if s.get("limit"):  # why a share group falls behind (`dimster explain` after the run)
        allows = f": allows {s['limitRate']:,.0f} msg/s" if s.get("limitRate") is not None else ""
        console.print(f"limit: {s['limit']}{allows} ({s['limitInputs']})", markup=False)
    from dimster.verdict.judge import quantity  # the thresholds' grammar loads only here

    for t in s.get("thresholds") or []:  # over the measured phase so far
        state = {True: "passing", False: "failing", None: "no value yet"}[t["passing"]]
        console.print(f"threshold {t['threshold']}: {quantity(t['value'], t['unit'])} ({state})", markup=False)


def wait(
    env: str = EnvArg,
    until: str = typer.Option(..., "--until", help="Condition, e.g. 'backlog<1000' or 'consRate>=0.95*pubRate'."),
    timeout: float = typer.Option(300, "--timeout", help="Seconds before giving up (exit code 6)."),
    every: float = typer.Option(1.0, "--every", help="Seconds between checks."),
) -> None:
    """Block until a condition on the run's status holds. Exit 0 when it does, 6 on timeout, 5 when
    no run is active."""
    if not (every > 0 and math.isfinite(every)):  # 0 would ask the run as fast as it answers
        raise typer.BadParameter(f"must be a finite number of seconds above 0 (got {every:g})", param_hint="'--every'")
    held, s = wait_until(env, until, timeout, every)
    if not held:
        raise WaitTimedOut(
            f"'{until}' did not hold within {timeout:g}s (backlog {s['backlog']:,}, "
            f"pub {s['pubRate']:,.0f} msg/s, cons {s['consRate']:,.0f} msg/s)"
        )
    console.print(f"'{until}' holds after {s['elapsedSeconds']:.0f}s of load")


def stop(
    env: str = EnvArg,
    timeout: float = typer.Option(600, "--timeout", help="Seconds to wait for the run to finish."),
) -> None:
    """Stop the run of ENV gracefully (producers stop, consumers drain, results and summary complete)
    and wait until its process has ended."""
    answer = stop_run(env, timeout)
    console.print(f"run of '{env}' stopped; results in {answer['results']}")


def stop_run(env: str, timeout: float) -> dict:
    """Ask the run of `env` to stop and wait until its process has ended; the control API's answer."""
    state = read_run_state(env)
    answer = control_request(env, "POST", "/stop", {}, timeout=30)
    deadline = Deadline(timeout)
    run = TrackedProcess(state["pid"], state["started"]) if state is not None else None
    while run is not None and run.alive():
        if deadline.passed():
            raise WaitTimedOut(f"the run of '{env}' was still stopping after {timeout:g}s")
        time.sleep(0.2)
    return answer


def notify_run(env: str, event: str, message: str, **details: object) -> None:
    """Tell the run of `env`, if there is one, about a cluster event (best effort)."""
    with contextlib.suppress(DimsterError):
        control_request(env, "POST", "/event", {"event": event, "message": message, **details}, timeout=10)
