"""Environment keys as campaign dimensions (`cluster.kafkaVersion`, `cluster.nodes`, `cluster.heap`):
the plan, the refusals and the campaign's bring-ups without Kafka, then one campaign over two Kafka
versions on a real one-node cluster of the test's own."""

import json

import pytest
import yaml

from dimster.campaign import environments, runner
from dimster.campaign.model import load_campaign
from dimster.coordinator.loop.one_run import RunOutcome
from dimster.environment import load_environment
from dimster.errors import DimsterError
from tests.conftest import dimster, one_error_line, spare_ports_yaml, write_environment

BASE = {
    "name": "base",
    "partitionsPerTopic": 1,
    "messageSize": 256,
    "producerRate": 100,
    "consumersPerGroup": 1,
    "warmupSeconds": 0,
    "durationSeconds": 5,
    "reportIntervalSeconds": 1,
    "drainTimeoutSeconds": 30,
}
VERSIONS = ["4.3.1", "4.4.0"]


def write_campaign(folder, dimensions, base=None, **keys):
    path = folder / "campaign.yaml"
    data = {"name": "versions", "base": base or BASE, "dimensions": dimensions, **keys}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def versions_by_rate(folder, base=None, **keys):
    """producerRate listed first, the version second: the plan still runs each version's points together."""
    dimensions = [
        {"key": "producerRate", "values": [100, 200]},
        {"key": "cluster.kafkaVersion", "values": VERSIONS},
    ]
    return write_campaign(folder, dimensions, base=base, **keys)


@pytest.mark.unit
def test_points_are_grouped_by_environment_and_the_workload_varies_inside(tmp_path):
    campaign = load_campaign(versions_by_rate(tmp_path))
    assert [(p.index, p.environment, p.workload.producer_rate) for p in campaign.points] == [
        (1, {"kafkaVersion": "4.3.1"}, 100),
        (2, {"kafkaVersion": "4.3.1"}, 200),
        (3, {"kafkaVersion": "4.4.0"}, 100),
        (4, {"kafkaVersion": "4.4.0"}, 200),
    ]
    assert campaign.points[0].label == "cluster.kafkaVersion=4.3.1, producerRate=100"
    assert campaign.points[2].workload.name == "versions-p3"
    # a key of the environment co-varying with one of the workload: each goes where it belongs
    mixed = load_campaign(
        write_campaign(tmp_path, [{"keys": ["cluster.nodes", "replicationFactor"], "values": [[1, 1], [3, 3]]}])
    )
    assert [(p.environment, p.workload.replication_factor) for p in mixed.points] == [
        ({"nodes": 1}, 1),
        ({"nodes": 3}, 3),
    ]


@pytest.mark.unit
@pytest.mark.parametrize("name", ["local", "localBeefy", "localSecure", "localBeefyNetns", "docker", "dockerBeefy"])
def test_a_points_profile_is_the_environments_with_its_values_only(name):
    profile = load_environment(name)
    changed = environments.point_profile(profile, {"kafkaVersion": "4.3.1", "heap": "768m"}, "c.yaml")
    assert type(changed) is type(profile) and (changed.kafka_version, changed.heap) == ("4.3.1", "768m")
    keep = {"kafkaVersion", "heap"}
    same = {k: v for k, v in changed.model_dump(by_alias=True).items() if k not in keep}
    assert same == {k: v for k, v in profile.model_dump(by_alias=True).items() if k not in keep}


@pytest.mark.unit
def test_dry_run_names_each_environment_once_before_its_points(tmp_path):
    """Java clients: each point's properties are judged by its version's (one process holds one)."""
    path = versions_by_rate(tmp_path, base={**BASE, "clientLibrary": "java"})
    result = dimster("campaign", "local", "-c", str(path), "--dry-run")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].strip() == "on kafkaVersion=4.3.1 (brought up with fresh data):"
    assert lines[3].strip() == "on kafkaVersion=4.4.0 (brought up with fresh data):"
    assert "point 2" in lines[2] and "cluster.kafkaVersion=4.3.1, producerRate=200" in lines[2]
    assert "point 3" in lines[4] and "cluster.kafkaVersion=4.4.0, producerRate=100" in lines[4]
    assert "4 run(s) of 'versions' in mode steady on 2 environment(s), each started once" in lines[-1]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("key", "values", "expected"),
    [
        ("cluster.workers", [2], "'cluster.workers' cannot vary between points: the environment keys a campaign "
         "varies are cluster.kafkaVersion, cluster.nodes, cluster.heap"),
        ("cluster.backend", ["docker"], "'cluster.backend' cannot vary between points"),
        ("cluster.brokerPortBase", [20000], "'cluster.brokerPortBase' cannot vary between points"),
        ("cluster.kafkaVersoin", ["4.3.1"], "'cluster.kafkaVersoin' is no environment key (did you mean "
         "'cluster.kafkaVersion'?)"),
        ("cluster.kafkaVersion", ["4.4.0", "4.1.0"], "cluster.kafkaVersion value '4.1.0': must be 4.2.0 or newer"),
        ("cluster.kafkaVersion", [4.4], "cluster.kafkaVersion value 4.4 is not a Kafka version such as 4.3.1"),
        ("cluster.nodes", [1, 10], "cluster.nodes value 10: Input should be less than or equal to 9"),
        ("cluster.heap", ["lots"], "cluster.heap value 'lots': String should match pattern"),
    ],
)  # fmt: skip
def test_a_cluster_key_or_value_that_cannot_vary_is_refused_before_anything_runs(tmp_path, key, values, expected):
    path = write_campaign(tmp_path, [{"key": key, "values": values}])
    assert refusal(path).startswith(f"{path}: {expected}")


@pytest.mark.unit
def test_a_replication_factor_above_a_points_node_count_is_refused(tmp_path):
    path = write_campaign(tmp_path, [{"key": "cluster.nodes", "values": [3, 1]}], base={**BASE, "replicationFactor": 3})
    assert refusal(path) == f"{path}: point 2 (cluster.nodes=1): replicationFactor 3 needs 3 brokers; 'local' has 1"


def refusal(path, env: str = "local") -> str:
    """What `dimster campaign ENV -c PATH` refuses the campaign with, before anything runs (in process)."""
    from dimster.campaign.checks import check_points

    with pytest.raises(DimsterError) as refused:
        check_points(load_campaign(path), load_environment(env))
    assert "\n" not in str(refused.value)
    return str(refused.value)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("profile", "env", "expected"),
    [
        ("backend: external\nbootstrapServers: 127.0.0.1:9\n", {}, "cluster.kafkaVersion: 'other' is an external "
         "cluster, which dimster does not bring up; a cluster. dimension needs an environment of backend local"),
        ("backend: docker\nimage: apache/kafka:4.4.0\n", {},
         "cluster.kafkaVersion: 'other' names its image (apache/kafka:4.4.0), one version; drop image:"),
        ("backend: local\nnodes: 1\n", {"KAFKA_HOME": "/opt/kafka"},
         "cluster.kafkaVersion: KAFKA_HOME is set, so every point would run that one distribution"),
    ],
)  # fmt: skip
def test_an_environment_that_cannot_change_version_between_points_is_refused(
    tmp_path, project, monkeypatch, profile, env, expected
):
    backend = yaml.safe_load(profile)["backend"]
    write_environment(project, "other", profile + ("" if backend == "external" else spare_ports_yaml(backend=backend)))
    for name, value in {"DIMSTER_PROJECT_DIR": str(project), **env}.items():
        monkeypatch.setenv(name, value)
    path = versions_by_rate(tmp_path)
    assert refusal(path, "other").startswith(f"campaign.yaml: {expected}")  # the project holds the file


@pytest.mark.unit
def test_a_refused_cluster_dimension_is_one_error_line_and_exit_code_2(tmp_path, project):
    write_environment(project, "other", "backend: external\nbootstrapServers: 127.0.0.1:9\n")
    path = versions_by_rate(tmp_path)
    result = dimster("campaign", "other", "-c", str(path), "--dry-run", env={"DIMSTER_PROJECT_DIR": str(project)})
    one_error_line(result, "campaign.yaml: cluster.kafkaVersion: 'other' is an external cluster", code=2)
    keyed = write_campaign(tmp_path, [{"key": "cluster.security", "values": [None]}])
    result = dimster("campaign", "local", "-c", str(keyed), "--dry-run")
    one_error_line(result, "'cluster.security' cannot vary", code=2)


class Cluster:
    """Stands in for the cluster and run_workload: what was taken down, fetched and run, in order."""

    def __init__(self, monkeypatch, script=()):
        self.events: list[tuple] = []
        self.script = list(script)  # what each run does: None completes, an exception is raised
        monkeypatch.setattr(environments, "take_down", lambda p, _: self.events.append(("down", p.kafka_version)))
        monkeypatch.setattr(runner, "fetch_versions", lambda versions: self.events.append(("fetch", sorted(versions))))
        monkeypatch.setattr(runner, "run_workload", self.run)

    def run(self, workload, profile, root, **_):
        self.events.append(("run", workload.name, profile.kafka_version))
        if self.script and (what := self.script.pop(0)) is not None:
            raise what
        bundle = root / f"bundle-{workload.name}-{len(self.events)}"
        bundle.mkdir()
        return RunOutcome(bundle, "completed", 0, None, {"lost": 0}, mode={"type": "steady"})


@pytest.mark.unit
def test_each_environment_starts_fresh_once_and_the_last_goes_down_at_the_end(tmp_path, monkeypatch):
    campaign = load_campaign(versions_by_rate(tmp_path, repeat=2))
    cluster = Cluster(monkeypatch)
    folder = runner.CampaignFolder.create(tmp_path / "c", campaign, "local")
    outcome = runner.run_campaign(campaign, folder, load_environment("local"), say=lambda _: None)
    assert outcome.exit_code == 0 and len(outcome.ran) == 8
    runs = [("run", f"versions-p{i}", v) for i, v in [(1, "4.3.1"), (2, "4.3.1"), (3, "4.4.0"), (4, "4.4.0")]]
    assert cluster.events == [
        ("fetch", VERSIONS),
        ("down", "4.3.1"),
        *[run for run in runs[:2] for _ in range(2)],
        ("down", "4.4.0"),
        *[run for run in runs[2:] for _ in range(2)],
        ("down", "4.4.0"),
    ]


@pytest.mark.unit
def test_a_resumed_campaign_brings_its_first_points_environment_up_fresh(tmp_path, monkeypatch):
    campaign = load_campaign(versions_by_rate(tmp_path))
    profile = load_environment("local")
    cluster = Cluster(monkeypatch, [None, None, DimsterError("node 1 did not register", exit_code=3)])
    folder = runner.CampaignFolder.create(tmp_path / "c", campaign, "local")
    with pytest.raises(DimsterError, match="did not register"):
        runner.run_campaign(campaign, folder, profile, say=lambda _: None)
    assert cluster.events[-2:] == [("run", "versions-p3", "4.4.0"), ("down", "4.4.0")]  # not left half up
    cluster.events.clear()
    resumed = runner.run_campaign(campaign, runner.CampaignFolder.open(folder.path), profile, say=lambda _: None)
    assert resumed.exit_code == 0 and resumed.ran == ["point 3", "point 4"]
    assert cluster.events == [
        ("fetch", ["4.4.0"]),
        ("down", "4.4.0"),
        ("run", "versions-p3", "4.4.0"),
        ("run", "versions-p4", "4.4.0"),
        ("down", "4.4.0"),
    ]
    state = json.loads((folder.path / "campaign.json").read_text())
    assert [p["values"]["cluster.kafkaVersion"] for p in state["points"]] == ["4.3.1", "4.3.1", "4.4.0", "4.4.0"]
    assert [p["status"] for p in state["points"]] == ["completed"] * 4


@pytest.mark.kafka
def test_a_campaign_over_two_kafka_versions_runs_each_point_on_its_own_fresh_broker(
    tmp_path, project, spark, state_dir
):
    """Two points, one per version, on a one-node cluster of the test's own (spare slot 1): each
    point's broker ran its version on fresh data (its log names that version only), run.json records
    it, the cluster is gone at the end, and the summary and page compare the two points."""
    from dimster.pipeline.campaign_summary import summarize_campaign
    from dimster.report.campaign_page import write_campaign_page

    write_environment(project, "versions", f"backend: local\nnodes: 1\nheap: 512m\n{spare_ports_yaml(1)}")
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    path = write_campaign(tmp_path, [{"key": "cluster.kafkaVersion", "values": VERSIONS}])
    try:
        result = dimster("campaign", "versions", "-c", str(path), "--results", str(tmp_path), "--no-summary", env=env)
    finally:
        dimster("cluster", "down", "versions", "--purge", env=env)
    assert result.code == 0, result.stderr + result.stdout
    assert result.stdout.count("'versions' down, its data deleted, up again fresh") == 2
    [folder] = [p for p in tmp_path.iterdir() if p.name.endswith("-versions")]
    state = json.loads((folder / "campaign.json").read_text())
    assert [p["status"] for p in state["points"]] == ["completed", "completed"]
    assert [p["totals"]["lost"] for p in state["points"]] == [0, 0]
    for point, version in zip(state["points"], VERSIONS, strict=True):
        bundle = folder / point["bundle"]
        assert json.loads((bundle / "run.json").read_text())["versions"]["kafka"] == version
        assert yaml.safe_load((bundle / "environment.yaml").read_text())["kafkaVersion"] == version
        log = (bundle / "logs" / "broker-1.log").read_text()
        other = next(v for v in VERSIONS if v != version)
        assert f"Kafka version: {version}" in log and f"Kafka version: {other}" not in log  # fresh: its own log only
    status = dimster("cluster", "status", "versions", "--json", env=env)
    assert json.loads(status.stdout)["running"] is False and not (state_dir / "clusters" / "versions").exists()
    summary = summarize_campaign(folder, spark)
    assert [(p["point"], p["values"]["cluster.kafkaVersion"]) for p in summary["points"]] == [
        (1, "4.3.1"),
        (2, "4.4.0"),
    ]
    assert all(p["metrics"]["produced_msgs_per_s"]["mean"] > 0 for p in summary["points"])
    page = write_campaign_page(folder).read_text()
    assert "cluster.kafkaVersion" in page and all(f"cluster.kafkaVersion={v}" in page for v in VERSIONS)
