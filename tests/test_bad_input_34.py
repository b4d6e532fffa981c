"""Bad input found in issue 34, each one clear line (or, from an agent, a clear worker loss): a
campaign value YAML 1.1 read as a date (now the text written), infinite numbers, absurd client
counts, `wait --every 0`, a brokerConfig for an external cluster, an unreadable agent message and a
log file named like a path."""

import pytest

from dimster.campaign.model import load_campaign
from dimster.coordinator.loop.one_run import with_workload_broker_config
from dimster.coordinator.workers.remote import RemoteWorkers
from dimster.coordinator.workers.seam import WorkerLost
from dimster.environment import parse_profile
from dimster.errors import DimsterError
from dimster.worker.protocol import Closed, LogFileSent, encode
from dimster.workload.model import parse_workload
from tests.agents import inproc_agent_link
from tests.conftest import dimster, one_error_line, write_environment

pytestmark = pytest.mark.unit


# ---- workload and campaign files -----------------------------------------------------------------
def test_a_campaign_value_that_yaml_1_1_read_as_a_date_is_the_text_written(tmp_path):
    path = tmp_path / "dates.yaml"
    path.write_text(
        "name: dates\nbase: {name: b, durationSeconds: 1}\n"
        "dimensions:\n  - key: kafkaConfig.producerConfig.client.id\n    values: [2026-01-01]\n"
    )
    [point] = load_campaign(path).points
    assert point.workload.kafka_config.producer_config["client.id"] == "2026-01-01"


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_an_infinite_producer_rate_is_refused(tmp_path, value):
    path = tmp_path / "inf.yaml"
    path.write_text(f"name: inf\nproducerRate: {value}\n")
    one_error_line(dimster("validate", str(path)), "inf.yaml", "'producerRate'", "finite")


def test_an_infinite_number_by_set_or_deep_in_the_workload_is_refused(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("name: w\n")
    one_error_line(dimster("validate", str(path), "--set", "producerRate=.inf"), "'producerRate'", "finite")
    with pytest.raises(DimsterError, match=r"key 'mode.targetE2eP99Ms': must be a finite number \(got nan\)"):
        parse_workload({"name": "w", "mode": {"type": "explore-limits", "targetE2eP99Ms": float("nan")}}, "w.yaml")


def test_client_counts_beyond_the_bound_are_refused(tmp_path):
    path = tmp_path / "many.yaml"
    path.write_text("name: many\ntopics: 1000\ngroupsPerTopic: 100\nconsumersPerGroup: 5000\n")
    one_error_line(
        dimster("validate", str(path)),
        "many.yaml",
        "500,000,000 consumers",
        "consumersPerGroup 5000",
        "100,000 clients",
    )
    # the bound itself is a valid run
    bound = {"topics": 100, "producersPerTopic": 0, "groupsPerTopic": 1, "consumersPerGroup": 1000}
    assert parse_workload({"name": "w", **bound}, "w").total_consumers == 100_000


# ---- the CLI -------------------------------------------------------------------------------------
@pytest.mark.parametrize("every", ["-1", "0", "nan"])
def test_wait_every_must_be_above_zero(every):
    one_error_line(dimster("wait", "local", "--until", "backlog<1", f"--every={every}"), "'--every'", "above 0")


# ---- a run ---------------------------------------------------------------------------------------
def test_broker_config_for_an_external_cluster_is_refused():
    external = parse_profile({"name": "ext", "backend": "external", "bootstrapServers": "127.0.0.1:9092"})
    workload = parse_workload({"name": "w", "brokerConfig": {"num.io.threads": 16}}, "w")
    with pytest.raises(DimsterError, match=r"num\.io\.threads.*'ext', an external cluster"):
        with_workload_broker_config(workload, external)
    plain = parse_workload({"name": "w"}, "w")
    assert with_workload_broker_config(plain, external) is external
    local = parse_profile({"name": "loc", "backend": "local"})
    assert with_workload_broker_config(workload, local).broker_overrides["num.io.threads"] == 16


# ---- agents --------------------------------------------------------------------------------------
@pytest.fixture
def agent_link(tmp_path):
    with inproc_agent_link(tmp_path, timeout=60) as held:
        yield held


def receive_all(workers: RemoteWorkers) -> list:
    return [message for _, message in workers.receive(0.5)]


def test_an_unreadable_agent_message_is_a_worker_lost_with_its_reason(agent_link, tmp_path):
    workers, agent = agent_link
    agent.send(b"\x93not msgpack of ours")
    [lost] = receive_all(workers)
    assert isinstance(lost, WorkerLost)
    assert "worker 0 (agent agent-a:1) sent what dimster" in lost.reason and "cannot read" in lost.reason
    assert workers.links[0].gone and (tmp_path / "worker-0.log.missing").is_file()
    agent.send_multipart([b"0", encode(Closed())])
    assert receive_all(workers) == []  # a lost link is heard of no more


@pytest.mark.parametrize("name", ["", ".", "..", "../run.json", "sub/worker.log", "a\\b.log", ".hidden"])
def test_a_log_file_named_like_a_path_is_refused(agent_link, tmp_path, name):
    workers, agent = agent_link
    logs = tmp_path / "logs"
    logs.mkdir()
    workers.log_dir = logs
    for message in (LogFileSent(name, b"evil\n"), LogFileSent("worker-0.log", b"fine\n"), Closed()):
        agent.send_multipart([b"0", encode(message)])  # worker 0's
    assert [type(m) for m in receive_all(workers)] == [Closed]
    assert sorted(p.name for p in logs.iterdir()) == ["worker-0.log", "worker-0.log.refused"]
    assert (logs / "worker-0.log").read_bytes() == b"fine\n"
    assert repr(name) in (logs / "worker-0.log.refused").read_text()
    assert not (tmp_path / "run.json").exists()


def test_a_campaign_of_broker_configs_on_an_external_cluster_is_refused_before_it_runs(project, tmp_path):
    write_environment(project, "outside", "backend: external\nbootstrapServers: 127.0.0.1:9\n")
    path = tmp_path / "brokers.yaml"
    path.write_text(
        "name: brokers\nbase: {name: b, durationSeconds: 1}\n"
        "dimensions:\n  - key: brokerConfig.num.io.threads\n    values: [4, 8]\n"
    )
    result = dimster("campaign", "outside", "-c", str(path), "--dry-run", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "brokers.yaml", "point 1", "num.io.threads", "'outside', an external cluster")
