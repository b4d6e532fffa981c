"""Runs of `dimster run` on the real clusters as the run tests make them: a workload file from BASE
plus keys, the CLI as a subprocess, and readers of the results bundle.

A run that only has to carry records ends on counts, not on a clock: `run_until` starts it detached,
waits until a status condition holds (`received>=2000`) and stops it, so a slow machine takes longer
but never makes a run carry fewer records than its test counts on."""

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from dimster.coordinator.control.run_state import console_log, control_request, wait_until
from tests.bench import bench_script
from tests.cli import REPO, dimster

BASE = {
    "topics": 1,
    "partitionsPerTopic": 3,
    "messageSize": 256,
    "producersPerTopic": 2,
    "producerRate": 500,
    "groupsPerTopic": 1,
    "consumersPerGroup": 3,
    "warmupSeconds": 2,
    "durationSeconds": 20,
    "reportIntervalSeconds": 5,
    "drainTimeoutSeconds": 30,
    # Batches of some 25 records at 500 msg/s: at linger 5 ms each Produce, ShareFetch and share-state
    # write carried one or two records, and a run of 5,000 records cost the broker 8 CPU-s; now 3.
    "kafkaConfig": {"producerConfig": {"linger.ms": 50}},
}


def write_workload(folder: Path, name: str, **keys) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, **BASE, **keys}))
    return path


def only_bundle(results: Path) -> Path:
    [bundle] = list(results.iterdir())
    return bundle


def run_info(bundle: Path) -> dict:
    return json.loads((bundle / "run.json").read_text())


def table(bundle: Path, name: str):
    return pq.read_table(bundle / "metrics" / name).to_pandas()


def events(bundle: Path, kind: str | None = None) -> list[dict]:
    """The run's events (of one kind)."""
    lines = (bundle / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if kind is None or e["event"] == kind]


def modifications(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "modifications.jsonl").read_text().splitlines()]


def run_to_end(tmp_path, name, summary=False, **keys) -> Path:
    workload = write_workload(tmp_path, name, **keys)
    results = tmp_path / "results"
    extra = [] if summary else ["--no-summary"]
    result = dimster("run", "local", "-w", str(workload), "--results", str(results), *extra, timeout=300)
    assert result.code == 0, result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert "run completed" in result.stdout
    return only_bundle(results)


def summarized(bundle: Path, spark: str) -> dict:
    """The end of a run (summary/ and report.html, by the run's own code) in this process, on the
    session's Spark (the `spark` fixture's master) rather than a Spark of its own; summary.json's content."""
    from dimster.cli.summary import summarize_after_run

    summarize_after_run(bundle, spark)  # a failure is a warning line there: reading summary.json then fails
    return json.loads((bundle / "summary" / "summary.json").read_text())


def start_run(tmp_path, name, **keys) -> tuple[subprocess.Popen, Path]:
    workload = write_workload(tmp_path, name, **keys)
    results = tmp_path / "results"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dimster",
            "run",
            "local",
            "-w",
            str(workload),
            "--results",
            str(results),
            "--no-summary",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        bundles = list(results.glob("*")) if results.exists() else []
        if bundles and (bundles[0] / "metrics" / "intervals").exists():
            return process, bundles[0]
        time.sleep(0.5)
    process.kill()
    raise AssertionError("the run did not start measuring within 120 s: " + process.communicate()[1])


def status(env: str = "local") -> dict:
    """The running run's status, what `dimster status ENV --json` prints, read through the run's control
    API in this process: a CLI process for each reading cost a test that polls it most of a core. The
    command itself: test_modes and test_upgrade_live (--json), test_campaigns (its lines)."""
    return control_request(env, "GET", "/status", timeout=30)


def wait(condition: str, timeout: int = 90, env: str = "local", cli_env: dict[str, str] | None = None) -> None:
    """CONDITION must hold within `timeout` seconds: `dimster wait ENV --until CONDITION --every 0.25`'s
    own loop (run_state.wait_until), in this process (a CLI process a wait cost about a second of CPU each, some 40 a
    session). The command itself: the scenario script's test (its every step), test_distributed,
    test_secrets. With `cli_env` (another state folder or project), the command."""
    if cli_env is not None:
        result = dimster("wait", env, "--until", condition, "--timeout", str(timeout), "--every", "0.25", env=cli_env)
        assert result.code == 0, result.stderr + result.stdout
        return
    held, s = wait_until(env, condition, timeout, 0.25)
    assert held, f"'{condition}' did not hold within {timeout} s: {s}"


def scrape_samples(url: str) -> list:
    """A Prometheus endpoint's samples (each with .name, .labels, .value)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def scrape(url: str) -> dict[str, tuple[dict, float]]:
    """A Prometheus endpoint's samples: name -> (labels, value) of one series of each name."""
    return {s.name: (s.labels, s.value) for s in scrape_samples(url)}


def start_detached(
    tmp_path: Path, name: str, env: str = "local", cli_env: dict[str, str] | None = None, summary: bool = False, **keys
) -> Path:
    """A run of BASE with `keys` (durationSeconds 0 unless given) on `env`, started with --detach: its
    bundle, once load flows."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    workload = write_workload(tmp_path, name, **{"durationSeconds": 0, **keys})
    extra = [] if summary else ["--no-summary"]
    started = dimster(
        "run", env, "-w", str(workload), "--detach", "--json", "--results", str(tmp_path / "results"), *extra,
        env=cli_env,
    )  # fmt: skip
    assert started.code == 0, started.stderr + started.stdout
    return Path(json.loads(started.stdout)["results"])


def stop(env: str = "local", cli_env: dict[str, str] | None = None) -> None:
    result = dimster("stop", env, env=cli_env)
    assert result.code == 0, result.stderr + result.stdout


def run_until(
    tmp_path: Path,
    name: str,
    until: str,
    env: str = "local",
    cli_env: dict[str, str] | None = None,
    summary: bool = False,
    timeout: int = 120,
    **keys,
) -> Path:
    """A run that ends on counts: started detached, stopped once `until` holds (producers stop,
    consumers drain, as at the end of a duration). Its bundle, the run ended."""
    bundle = start_detached(tmp_path, name, env, cli_env, summary, **keys)
    try:
        wait(until, timeout, env, cli_env)
    finally:
        dimster("stop", env, env=cli_env)  # not asserted: a failed wait is the error to see
    info = run_info(bundle)
    assert info["status"] == "completed", info.get("failure")
    return bundle


def modify(*sets: str, env: str = "local") -> dict:
    """`dimster run ENV --modify --set ...` of the running run, which must apply: its JSON answer."""
    result = dimster("run", env, "--modify", "--json", "--set", *sets)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def evidence(bundle: Path, lines: int = 40) -> str:
    """What a failed assertion on a run shows, so that its cause can be chased after the run's folder is
    gone: its totals, its events, and the last lines of each log of the bundle (workers, brokers)."""
    info = json.loads((bundle / "run.json").read_text()) if (bundle / "run.json").exists() else {}
    parts = [f"totals: {info.get('totals')}", "events:"]
    if (bundle / "events.jsonl").exists():
        parts += (bundle / "events.jsonl").read_text().splitlines()[-lines:]
    parts += lag_by_partition(bundle) + consumers_by_interval(bundle)
    for log in sorted((bundle / "logs").glob("*.log")):
        parts += [f"--- {log.name}", *log.read_text(errors="replace").splitlines()[-lines:]]
    return "\n".join(parts)


def lag_by_partition(bundle: Path) -> list[str]:
    """The groups' lag, as the brokers told it, a line per group and partition and a column per reading
    (whether one partition stood still while the others flowed)."""
    return by_time(bundle, "group_lag", lambda t: t.partition >= 0, ["group", "partition"], "lag")


def consumers_by_interval(bundle: Path) -> list[str]:
    """Each consumer's records received, report by report: whether one stood still while the others
    flowed (which partition it held is in the lag's lines)."""
    return by_time(bundle, "intervals", lambda t: t.role != "producer", ["client_id"], "received")


def by_time(bundle: Path, name: str, keep, index: list[str], values: str) -> list[str]:
    """A metrics table's `values` for the rows `keep` chooses, a line per `index` and a column per second
    of the run: a heading and the table's lines, or nothing where the run wrote no such rows."""
    if not (bundle / "metrics" / name).exists():
        return []
    rows = table(bundle, name)
    rows = rows[keep(rows)]
    if rows.empty:
        return []
    pivoted = rows.pivot_table(index=index, columns="run_time_s", values=values, aggfunc="sum")
    return [f"{values} by {', '.join(index)} (columns: seconds of the run):", *pivoted.to_string().splitlines()]


def detached_evidence(output: str, env: str = "local", lines: int = 40) -> str:
    """The evidence of the detached run of `env` whose start printed `output` ("results in BUNDLE;"):
    the bundle's, and its console's last lines (a crashed coordinator's last words)."""
    found = re.search(r"results in (\S+);", output)
    if found is None:
        return "no detached run was started"
    bundle, console = Path(found[1]), console_log(env)
    tail = console.read_text(errors="replace").splitlines()[-lines:] if console.is_file() else ["(no console)"]
    return "\n".join([evidence(bundle, lines), f"--- {console.name}", *tail])


def no_loss(info: dict) -> None:
    """A completed run whose every record was received once."""
    totals = info["totals"]
    assert info["status"] == "completed", info.get("failure")
    assert totals["lost"] == 0 and totals["duplicates"] == 0 and totals["sent"] == totals["received"] > 0, totals


@contextlib.contextmanager
def cpu_hog(seconds: float) -> Iterator[None]:
    """A busy process per core at normal priority while the block runs (scripts/bench/pressure.py), each
    ending by itself after `seconds` should the test be killed."""
    pressure = bench_script("pressure")
    hogs = pressure.start("cpu", seconds, os.cpu_count() or 1, 0.0)
    try:
        yield
    finally:
        pressure.stop(hogs)
