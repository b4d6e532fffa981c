"""Live tuning of a running workload from a second terminal, as scripts do it: detached runs,
status, modifications, waits, broker redeploys under load, stop."""

import json
import os
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import REPO, dimster, set_broker_config
from tests.runs import status, wait

pytestmark = pytest.mark.kafka

WORKLOAD = {
    "name": "live",
    "topics": 1,
    "partitionsPerTopic": 3,
    "messageSize": 256,
    "producersPerTopic": 1,
    "producerRate": 300,
    "groupsPerTopic": 1,
    "consumersPerGroup": 3,
    "warmupSeconds": 0,
    "durationSeconds": 0,
    "reportIntervalSeconds": 2,
    "drainTimeoutSeconds": 30,
    "kafkaConfig": {"producerConfig": {"linger.ms": 5}},
}


@pytest.fixture(scope="module", autouse=True)
def local_cluster_down_afterwards():
    yield
    dimster("stop", "local")
    assert dimster("cluster", "down", "local").code == 0


@pytest.fixture(params=["run", "cluster up"])
def local_started_by(request, project) -> str:
    """Who starts the `local` cluster under the test's run: the run itself (the cluster is down
    before it; seed 001's workflow) or an earlier `dimster cluster up`. Redeploying must work either way."""
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    dimster("stop", "local")
    assert dimster("cluster", "down", "local", env=env).code == 0
    if request.param == "cluster up":
        up = dimster("cluster", "up", "local", env=env)
        assert up.code == 0, up.stderr
    else:
        assert dimster("cluster", "status", "local", env=env).code == 1  # not running: the run starts it
    return request.param


@pytest.fixture
def detached_run(tmp_path):
    """A run of WORKLOAD on `local`, started with --detach; stopped at the end whatever happens."""
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(WORKLOAD))
    result = dimster(
        "run", "local", "-w", str(path), "--detach", "--json", "--no-summary", "--results", str(tmp_path / "results")
    )
    assert result.code == 0, result.stderr
    started = json.loads(result.stdout)
    wait("elapsedSeconds>3 and received>0")
    yield started
    dimster("stop", "local")


def modify(*sets: str) -> dict:
    result = dimster("run", "local", "--modify", "--json", "--set", *sets)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def stop_and_read(started: dict) -> tuple[dict, list[dict]]:
    result = dimster("stop", "local")
    assert result.code == 0, result.stderr
    bundle = started["results"]
    info = json.loads(Path(bundle, "run.json").read_text())
    modifications = [json.loads(x) for x in Path(bundle, "modifications.jsonl").read_text().splitlines()]
    return info, modifications


def no_loss(info: dict) -> None:
    totals = info["totals"]
    assert info["status"] == "completed"
    assert totals["lost"] == 0 and totals["duplicates"] == 0 and totals["sent"] == totals["received"] > 0


def test_live_rate_change_shows_in_the_counts(detached_run):
    before = status()
    assert before["settings"]["producerRate"] == 300 and before["phase"] in ("warmup", "measure")
    answer = modify("producerRate", "900")  # the `key value` form of the reference post
    [change] = answer["applied"]
    assert (change["key"], change["old"], change["new"], change["effect"]) == ("producerRate", 300, 900, "rate")
    wait("pubRate>850 and targetRate>850")
    wait(f"sent>{status()['sent'] + 4000}")  # several whole seconds at the new rate, however busy the machine
    info, modifications = stop_and_read(detached_run)
    no_loss(info)
    assert [m["key"] for m in modifications] == ["producerRate"]
    intervals = pq.read_table(f"{detached_run['results']}/metrics/intervals").to_pandas()
    producer = intervals[intervals.role == "producer"]
    assert set(producer.target_rate.round()) >= {300.0, 900.0}
    after = producer[(producer.end_time > change["applied"] + 2) & (producer.phase == "measure")]
    assert len(after) > 0 and set(after.target_rate) == {900.0}  # paced to the new rate from then on


def test_producer_config_change_recreates_producers_without_loss(detached_run):
    answer = modify("kafkaConfig.producerConfig.linger.ms=20", "kafkaConfig.producerConfig.batch.size=32768")
    assert {c["effect"] for c in answer["applied"]} == {"producers"}
    wait(f"sent>{status()['sent'] + 1500}")
    settings = status()["settings"]["kafkaConfig"]["producerConfig"]
    assert settings["linger.ms"] == 20 and settings["batch.size"] == 32768
    info, _ = stop_and_read(detached_run)
    no_loss(info)
    log = Path(detached_run["results"], "logs", "worker-0.log").read_text()
    assert "unacknowledged" not in log


def test_consumers_and_producers_scale_up_and_down(detached_run):
    modify("consumersPerGroup=5", "producersPerTopic=2")
    wait("consumers==5 and producers==2")
    wait(f"received>{status()['received'] + 1000}")
    modify("consumersPerGroup=2", "producersPerTopic=1")
    wait("consumers==2 and producers==1")
    wait(f"received>{status()['received'] + 600}")
    info, modifications = stop_and_read(detached_run)
    no_loss(info)
    changes = sorted((m["key"], m["new"]) for m in modifications)
    assert changes == [
        ("consumersPerGroup", 2),
        ("consumersPerGroup", 5),
        ("producersPerTopic", 1),
        ("producersPerTopic", 2),
    ]
    intervals = pq.read_table(f"{detached_run['results']}/metrics/intervals").to_pandas()
    consumers = intervals[intervals.role == "share_consumer"]
    assert {"c3", "c4"} <= set(consumers.client_id)  # the added ones ran and reported
    last = intervals[intervals.end_time > intervals.end_time.max() - 3]
    assert set(last[last.role == "share_consumer"].client_id) <= {"c0", "c1", "c2", "c3", "c4"}
    assert set(last[last.role == "producer"].client_id) == {"p0"}


def test_invalid_modification_changes_nothing(detached_run):
    before = status()["settings"]
    for sets, fragment in (
        (["producerRate=500", "partitionsPerTopic=1"], "partitionsPerTopic can only grow"),
        (["producerRate=500", "consumerType=CONSUMER_GROUP"], "'consumerType' cannot change during a run"),
        (["producerRate=500", "kafkaConfig.producerConfig.lingr.ms=5"], 'No such configuration property: "lingr.ms"'),
        (["producerRate=500", "consumerProcMsMin=9", "consumerProcMsMax=1"], "consumerProcMsMax (1.0) is below"),
        (["producerRat=500"], "unknown key 'producerRat' (did you mean 'producerRate'?)"),
        (["kafkaConfig.shareConsumerConfig.share.acquire.mode=record_limit"], "not supported by librdkafka"),
    ):
        result = dimster("run", "local", "--modify", "--set", *sets)
        assert result.code == 2, result.stderr
        assert len(result.error_lines) == 1 and fragment in result.error_lines[0], result.stderr
    assert status()["settings"] == before
    _, modifications = stop_and_read(detached_run)
    assert modifications == []


def test_partitions_grow_and_topic_config_changes_live(detached_run):
    answer = modify("partitionsPerTopic=4", "kafkaConfig.topicConfig.retention.ms=600000")
    assert {c["effect"] for c in answer["applied"]} == {"partitions", "topic-config"}
    wait(f"received>{status()['received'] + 900}")
    info, _ = stop_and_read(detached_run)
    no_loss(info)
    histograms = pq.read_table(f"{detached_run['results']}/metrics/histograms").to_pandas()
    assert 3 in set(histograms[histograms.metric == "e2e"].partition)  # the new partition carried records
    lag = pq.read_table(f"{detached_run['results']}/metrics/group_lag").to_pandas()
    assert 3 in set(lag.partition)  # the brokers' lag is read over the new partitions too


def test_modify_status_and_stop_without_a_run():
    for command in (
        ["run", "local", "--modify", "--set", "producerRate=1"],
        ["status", "local"],
        ["stop", "local"],
        ["wait", "local", "--until", "backlog<1"],
    ):
        result = dimster(*command)
        assert result.code == 5, (command, result.stderr)
        assert result.error_lines == [
            "dimster: error: no run is active for 'local' (start one with `dimster run local -w WORKLOAD.yaml`)"
        ]


def test_wait_times_out_with_exit_code_6(detached_run):
    result = dimster("wait", "local", "--until", "backlog>100000000", "--timeout", "2")
    assert result.code == 6 and "did not hold within 2s" in result.error_lines[0]
    bad = dimster("wait", "local", "--until", "__import__('os')")
    assert bad.code == 2 and "only numbers, status fields" in bad.error_lines[0]


def test_second_run_on_the_same_environment_is_refused(detached_run, tmp_path):
    path = tmp_path / "second.yaml"
    path.write_text(yaml.safe_dump({**WORKLOAD, "name": "second"}))
    result = dimster("run", "local", "-w", str(path), "--results", str(tmp_path / "r2"))
    assert result.code == 2 and "a run is already active for 'local'" in result.error_lines[0]


def test_a_scheduled_pause_and_a_live_restart_of_the_node_lose_nothing(tmp_path):
    """`faults:` pauses the one node of `local` for 3 s; `--set faults=...` adds a restart while the run goes on."""
    path = tmp_path / "faults.yaml"
    pause = {"atSeconds": 2, "action": "pause", "node": 1, "durationSeconds": 3}
    path.write_text(yaml.safe_dump({**WORKLOAD, "name": "faults", "faults": [pause]}))
    run = dimster("run", "local", "-w", str(path), "--detach", "--json", "--no-summary", "--results", str(tmp_path))
    assert run.code == 0, run.stderr
    started = json.loads(run.stdout)
    events_file = Path(started["results"], "events.jsonl")

    def faults() -> list[tuple[str, int]]:
        events = [json.loads(line) for line in events_file.read_text().splitlines()]
        return [(e["action"], e["node"]) for e in events if e["event"].startswith("fault")]

    wait("elapsedSeconds>7 and received>300")
    assert faults() == [("pause", 1), ("resume", 1)]
    at = round(status()["elapsedSeconds"]) + 3
    answer = modify(f"faults=[{{atSeconds: {at}, action: restart, node: 1}}]")
    assert any("faults: 1 step(s) to come" in note for note in answer["notes"]), answer
    wait(f"elapsedSeconds>{at + 1}")
    deadline = time.monotonic() + 60
    while len(faults()) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert faults() == [("pause", 1), ("resume", 1), ("restart", 1)]
    wait(f"received>{status()['received'] + 300}")
    info, modifications = stop_and_read(started)
    assert [m["key"] for m in modifications] == ["faults"]
    totals = info["totals"]  # a restart may deliver again what was not acknowledged yet: duplicates, counted
    assert info["status"] == "completed" and totals["lost"] == 0 and totals["sent"] == totals["acked"] > 0
    assert totals["received"] >= totals["sent"] and totals["backlog"] == 0


def test_cluster_redeploy_during_a_run_loses_nothing(tmp_path, project, local_started_by):
    """`dimster cluster redeploy` from another terminal restarts the broker under load, whichever
    dimster process started it."""
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    workload = tmp_path / "redeploy.yaml"
    workload.write_text(yaml.safe_dump({**WORKLOAD, "name": "redeploy"}))
    started = dimster(
        "run",
        "local",
        "-w",
        str(workload),
        "--detach",
        "--json",
        "--no-summary",
        "--results",
        str(tmp_path / "results"),
        env=env,
    )
    assert started.code == 0, started.stderr
    bundle = json.loads(started.stdout)["results"]
    wait("elapsedSeconds>3 and received>0")
    set_broker_config(project, "group.share.record.lock.duration.ms", 20000)  # read-only: needs a restart
    redeploy = dimster("cluster", "redeploy", "local", "--json", env=env)
    assert redeploy.code == 0, redeploy.stderr
    assert json.loads(redeploy.stdout)["restarted_nodes"] == [1]
    wait(f"received>{status()['received'] + 900}", timeout=120)
    assert dimster("stop", "local").code == 0
    info = json.loads(Path(bundle, "run.json").read_text())
    assert info["status"] == "completed"
    assert info["totals"]["lost"] == 0 and info["totals"]["sent"] == info["totals"]["acked"]
    events = [json.loads(x)["event"] for x in Path(bundle, "events.jsonl").read_text().splitlines()]
    assert "cluster_redeploy_started" in events and "cluster_redeploy_done" in events
    assert "broker_left" in events and "broker_back" in events


def test_scenario_script_runs_unattended(tmp_path):
    """The scenario script judges its own outcomes (exit 1 when one does not happen) and prints them,
    each followed by its numbers, in the order of the story. It runs the small reference workload on
    one partition at 500 msg/s with 8 consumers polling at most 10 records: under 100 locks all 8 are
    busy at the start (1,600 msg/s of processing) and 2 once batches hold 64 records (400 msg/s), so the
    outcomes show even where polling costs as much time as the processing (a slow or busy machine)."""
    workload = yaml.safe_load((REPO / "run/workloads/run-test/run-sharegroup-proc-time-5ms-small.yaml").read_text())
    workload.update(partitionsPerTopic=1, producersPerTopic=1, consumersPerGroup=8, producerRate=500)
    workload["kafkaConfig"]["shareConsumerConfig"]["max.poll.records"] = 10
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump(workload))
    result = subprocess.run(
        ["bash", "scripts/scenarios/share-batch-size-vs-record-locks.sh", "local"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "STEP_SECONDS": "12", "WORKLOAD": str(small), "RUN_OPTIONS": "--no-summary"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcomes = [
        "== start",
        "keeps up: consumed at the target rate",
        "== step 1",
        "== step 2",
        "falls behind: consumed below the target rate",
        "the backlog grows",
        "== fix 1",
        "drained",
        "copes again with the larger in-flight budget",
        "== fix 2",
        "drained",
        "copes again with record_limit: no poll holds more than max.poll.records (10)",
        "== stop",
        "run of 'local' stopped",
    ]
    lines = result.stdout.splitlines()
    at = -1
    for outcome in outcomes:  # each in turn, after the previous one
        at = next((i for i, line in enumerate(lines) if i > at and outcome in line), None)
        assert at is not None, f"'{outcome}' missing or out of order:\n{result.stdout}"
    numbers = [line for line in lines if "msg/s, consumed" in line and "backlog" in line]
    assert len(numbers) >= 7, result.stdout  # each judged outcome and step 1 print their numbers
    assert "FAILED" not in result.stdout
    assert "Traceback" not in result.stderr
