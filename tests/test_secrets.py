"""Secrets never reach a file dimster writes, a console or a command line: a secret given in the
workload, by `--set` at the start of a detached run (both forms), by a live `--modify --set` and as
a campaign dimension's values (a word and a number) is absent from every file of the results bundles
(summaries and pages included, made as the end of a run or campaign makes them), of the campaign
folder and of the state folder, from what the commands print, and from the command line of every
process while the runs go on (but the commands the test itself types)."""

import json
import os
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest
import yaml

from tests.conftest import dimster, files_holding
from tests.runs import BASE, summarized

pytestmark = pytest.mark.kafka

PASSWORD, KEY_PASSWORD = "kafkaConfig.commonConfig.sasl.password", "kafkaConfig.producerConfig.ssl.key.password"


@contextmanager
def command_lines_watched(values: list[str]) -> Iterator[list[str]]:
    """Every half second, the command line of every process (what `ps` shows every user) but this
    test's own commands (its children) and a process forked and not yet exec'd, which shows its
    parent's command line (`subprocess` forks, then execs; on a busy host the watcher sees the fork of
    a command the test wrote a secret on): the hits, `pid: value`, gathered while the block runs."""
    hits: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.5):
            seen = {p.info["pid"]: p.info for p in psutil.process_iter(["pid", "ppid", "cmdline"])}
            for pid, info in seen.items():
                parent = seen.get(info["ppid"])
                if info["ppid"] == os.getpid() or (parent is not None and parent["cmdline"] == info["cmdline"]):
                    continue
                line = " ".join(info["cmdline"] or [])
                hits.extend(f"{pid}: {value}" for value in values if value in line)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield hits
    finally:
        done.set()
        watcher.join()


def test_secrets_stay_out_of_files_consoles_and_command_lines(tmp_path, state_dir, spark):
    # librdkafka takes these properties on a PLAINTEXT cluster and does not use them
    in_workload, at_start, at_start_pair, live, in_campaign = (f"dimster-s-{secrets.token_hex(8)}" for _ in range(5))
    number = 8 * 10**10 + secrets.randbelow(10**10)  # a campaign's secret that YAML reads as a number
    values = [in_workload, at_start, at_start_pair, live, in_campaign, str(number)]
    workload = tmp_path / "secrets.yaml"
    config = {**BASE["kafkaConfig"], "commonConfig": {"sasl.password": in_workload}}
    workload.write_text(yaml.safe_dump({"name": "secrets", **BASE, "durationSeconds": 0, "kafkaConfig": config}))
    campaign_file = tmp_path / "campaign.yaml"
    base = {"name": "secrets", **BASE, "warmupSeconds": 0, "durationSeconds": 2, "reportIntervalSeconds": 1}
    dimension = {"keys": [PASSWORD, KEY_PASSWORD], "values": [[in_campaign, number]]}
    campaign_file.write_text(yaml.safe_dump({"name": "secrets", "base": base, "dimensions": [dimension]}))
    results, campaigns = tmp_path / "results", tmp_path / "campaigns"
    outputs = []

    def cli(*args: str) -> str:
        result = dimster(*args)
        outputs.append(result.stdout + result.stderr)
        assert result.code == 0, result.stderr + result.stdout
        return result.stdout

    with command_lines_watched(values) as hits:
        try:
            cli(
                "run", "local", "-w", str(workload), "--detach", "--results", str(results), "--no-summary",
                "--set", f"kafkaConfig.producerConfig.ssl.key.password={at_start}",
                "kafkaConfig.shareConsumerConfig.ssl.key.password", at_start_pair,
            )  # fmt: skip
            cli("wait", "local", "--until", "received>0", "--timeout", "90")
            cli("run", "local", "--modify", "--set", PASSWORD, live)
            cli("wait", "local", "--until", "received>0", "--timeout", "90")
            settings = json.loads(cli("status", "local", "--json"))["settings"]
            assert settings["kafkaConfig"]["commonConfig"]["sasl.password"] == "***"
        finally:
            cli("stop", "local")
        points = cli("campaign", "local", "-c", str(campaign_file), "--results", str(campaigns), "--no-summary")
    assert hits == []

    [bundle] = results.iterdir()
    summarized(bundle, spark)  # the summary and report, as the end of a run writes them
    info = json.loads((bundle / "run.json").read_text())
    assert info["status"] == "completed" and info["final_workload"]["kafkaConfig"]["commonConfig"] == {
        "sasl.password": "***"
    }
    assert (
        "--detach" in info["command_line"] and "kafkaConfig.producerConfig.ssl.key.password=***" in info["command_line"]
    )  # the command as typed, masked: the run's own process had no --set on its command line
    [change] = [json.loads(line) for line in (bundle / "modifications.jsonl").read_text().splitlines()]
    assert (change["key"], change["old"], change["new"]) == (PASSWORD, "***", "***")
    assert (bundle / "summary" / "summary.json").is_file() and (bundle / "report.html").is_file()

    from dimster.cli.summary import summarize_campaign_folder

    [folder] = campaigns.iterdir()
    summarize_campaign_folder(folder, spark)  # its summary and page, as the end of a campaign makes them
    label = "sasl.password=***1, ssl.key.password=***1"
    assert f"== point 1 (1 of 1): {label}" in points
    [point] = json.loads((folder / "campaign.json").read_text())["points"]
    assert (point["status"], point["label"]) == ("completed", label) and point["totals"]["received"] > 0
    assert "***1" in (folder / "campaign.html").read_text()
    assert files_holding(bundle, values) == []
    assert files_holding(folder, values) == []
    assert files_holding(state_dir, values) == []
    assert [value for value in values if any(value in output for output in outputs)] == []
