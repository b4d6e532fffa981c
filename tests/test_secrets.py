"""Secrets never reach a file dimster writes: a secret given in the workload, by `--set` at start and
by a live `--modify --set` is absent from every file of the results bundle (summary and report
included, made from the bundle as the end of a run makes them) and of the state folder, and from
what the commands print."""

import json
import secrets

import pytest
import yaml

from tests.conftest import dimster, files_holding
from tests.runs import BASE, summarized

pytestmark = pytest.mark.kafka


def test_secrets_stay_out_of_the_bundle_and_the_state_folder(tmp_path, state_dir, spark):
    # librdkafka takes these properties on a PLAINTEXT cluster and does not use them
    in_workload, at_start, live = (f"dimster-secret-{secrets.token_hex(8)}" for _ in range(3))
    workload = tmp_path / "secrets.yaml"
    config = {**BASE["kafkaConfig"], "commonConfig": {"sasl.password": in_workload}}
    workload.write_text(yaml.safe_dump({"name": "secrets", **BASE, "durationSeconds": 0, "kafkaConfig": config}))
    results = tmp_path / "results"
    outputs = []

    def cli(*args: str) -> str:
        result = dimster(*args)
        outputs.append(result.stdout + result.stderr)
        assert result.code == 0, result.stderr + result.stdout
        return result.stdout

    try:
        cli(
            "run", "local", "-w", str(workload), "--detach", "--results", str(results), "--no-summary",
            "--set", f"kafkaConfig.producerConfig.ssl.key.password={at_start}",
        )  # fmt: skip
        cli("wait", "local", "--until", "received>0", "--timeout", "90")
        cli("run", "local", "--modify", "--set", "kafkaConfig.commonConfig.sasl.password", live)
        cli("wait", "local", "--until", "received>0", "--timeout", "90")
        settings = json.loads(cli("status", "local", "--json"))["settings"]
        assert settings["kafkaConfig"]["commonConfig"]["sasl.password"] == "***"
    finally:
        cli("stop", "local")

    [bundle] = results.iterdir()
    summarized(bundle, spark)  # the summary and report, as the end of a run writes them
    info = json.loads((bundle / "run.json").read_text())
    assert info["status"] == "completed" and info["final_workload"]["kafkaConfig"]["commonConfig"] == {
        "sasl.password": "***"
    }
    [change] = [json.loads(line) for line in (bundle / "modifications.jsonl").read_text().splitlines()]
    assert (change["key"], change["old"], change["new"]) == ("kafkaConfig.commonConfig.sasl.password", "***", "***")
    assert (bundle / "summary" / "summary.json").is_file() and (bundle / "report.html").is_file()
    values = [in_workload, at_start, live]
    assert files_holding(bundle, values) == []
    assert files_holding(state_dir, values) == []
    assert [value for value in values if any(value in output for output in outputs)] == []
