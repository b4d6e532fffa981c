"""What the coordinator costs per agent: its CPU and how late reports and console lines are.

Starts a scratch one-node cluster and, for each agent count, that many `dimster worker serve` agents on
loopback, each hosting one producer and one share consumer that report every second; runs a workload
with a console line every second, then reads the run's own `coordinator` record (run.json): the
coordinator process's CPU share of one core during load, the lag from a report's end on the worker to
its handling, and from a console line's due time to its printing. Everything it starts it stops, by PID.

    .venv/bin/python scripts/bench/coordinator_per_agent.py [--agents 1,4,16] [--seconds 30] [--json-out F]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from common import DIMSTER, ROOT, dimster, free_block

TOKEN = "bench-token-" + os.urandom(12).hex()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_agents(count: int, token_file: Path, env: dict, folder: Path) -> tuple[list, list[str]]:
    processes, addresses = [], []
    for i in range(count):
        address = f"127.0.0.1:{free_port()}"
        log = (folder / f"agent-{i}.log").open("ab")
        command = [*DIMSTER, "worker", "serve", "--listen", address, "--token-file", str(token_file)]
        processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        addresses.append(address)
    for address in addresses:
        deadline = time.monotonic() + 60
        while dimster(env, "worker", "status", address, "--token-file", str(token_file)).returncode:
            if time.monotonic() > deadline:
                sys.exit(f"agent {address} did not come up")
    return processes, addresses


def stop(processes) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()


def measure(count: int, seconds: float, env: dict, project: Path, folder: Path, token_file: Path, bootstrap: str):
    processes, addresses = start_agents(count, token_file, env, folder)
    try:
        profile = {
            "backend": "external",
            "bootstrapServers": bootstrap,
            "workers": [{"address": a} for a in addresses],
            "workerTokenFile": str(token_file),
        }
        (project / "run" / "environments" / f"bench{count}.yaml").write_text(yaml.safe_dump(profile))
        workload = folder / f"agents-{count}.yaml"
        workload.write_text(
            yaml.safe_dump(
                {
                    "name": f"coordinator-{count}-agents",
                    "partitionsPerTopic": max(2, count),
                    "producersPerTopic": count,
                    "consumersPerGroup": count,
                    "producerRate": 20 * count,
                    "messageSize": 256,
                    "warmupSeconds": 2,
                    "durationSeconds": seconds,
                    "reportIntervalSeconds": 1,
                }
            )
        )
        results = folder / "results"
        run = dimster(env, "run", f"bench{count}", "-w", str(workload), "--results", str(results), "--no-summary")
        if run.returncode:
            sys.exit(f"run with {count} agents failed: {run.stderr or run.stdout[-2000:]}")
        [bundle] = [p for p in results.iterdir() if p.name.endswith(f"coordinator-{count}-agents")]
        info = json.loads((bundle / "run.json").read_text())
        return {"agents": count, "clients": 2 * count, **info["coordinator"], "totals": info["totals"]}
    finally:
        stop(processes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="1,4,16")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="dimster-coordinator-bench-"))
    project = folder / "project"
    shutil.copytree(ROOT / "run", project / "run")
    token_file = folder / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    env = {**os.environ, "DIMSTER_PROJECT_DIR": str(project), "DIMSTER_STATE_DIR": str(folder / "state")}
    base = free_block(20)
    cluster = {"backend": "local", "nodes": 1, "heap": "1g", "brokerPortBase": base, "controllerPortBase": base + 10}
    (project / "run" / "environments" / "benchcluster.yaml").write_text(yaml.safe_dump(cluster))
    up = dimster(env, "cluster", "up", "benchcluster")
    if up.returncode:
        sys.exit(up.stderr)
    rows = []
    try:
        for count in [int(n) for n in args.agents.split(",")]:
            rows.append(measure(count, args.seconds, env, project, folder, token_file, f"127.0.0.1:{base}"))
            r = rows[-1]
            print(
                f"{r['agents']:>3} agents, {r['clients']:>3} clients: coordinator CPU "
                f"{100 * r['cpu_share_of_one_core']:5.1f}% of one core; report lag p50 {r['report_lag_ms']['p50']} ms "
                f"p99 {r['report_lag_ms']['p99']} ms max {r['report_lag_ms']['max']} ms; console lag p50 "
                f"{r['console_lag_ms']['p50']} ms max {r['console_lag_ms']['max']} ms; "
                f"sent {r['totals']['sent']:,} received {r['totals']['received']:,} lost {r['totals']['lost']}",
                flush=True,
            )
    finally:
        dimster(env, "cluster", "down", "benchcluster", "--purge")
        if args.json_out:
            args.json_out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
