"""`dimster validate` catches what a run would refuse or silently read otherwise (issue 53, item 2):
Kafka's own config definitions judge brokerConfig names, groupConfig and topicConfig; a Kafka
property that contradicts a key of dimster's, values no test means, librdkafka's leniency with units,
a consumer section no client reads, and a replicationFactor above the brokers' count."""

import pytest
import yaml

from dimster.errors import DimsterError
from tests.cli import REPO, dimster

pytestmark = pytest.mark.unit


def workload_file(tmp_path, **keys) -> str:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"name": "w", "durationSeconds": 10, **keys}))
    return str(path)


@pytest.mark.parametrize(
    ("keys", "line"),
    [
        (
            {"brokerConfig": {"group.share.partition.max.record.lock": 400}},
            "brokerConfig: unknown broker property 'group.share.partition.max.record.lock' "
            "(did you mean 'group.share.partition.max.record.locks'?)",
        ),
        (
            {"groupConfig": {"share.record.lock.duration": 30000}},
            "groupConfig: unknown group config 'share.record.lock.duration' "
            "(did you mean 'share.record.lock.duration.ms'?)",
        ),
        (
            {"groupConfig": {"share.record.lock.duration.ms": "30s"}},
            "groupConfig: Invalid value 30s for configuration share.record.lock.duration.ms: Not a number of type INT",
        ),
        (
            {"kafkaConfig": {"topicConfig": {"retention.mss": 60000}}},
            "kafkaConfig.topicConfig: unknown topic config 'retention.mss' (did you mean 'retention.ms'?)",
        ),
        (
            {"kafkaConfig": {"topicConfig": {"min.insync.replicas": "abc"}}},
            "kafkaConfig.topicConfig: Invalid value abc for configuration min.insync.replicas: "
            "Not a number of type INT",
        ),
        (
            {"kafkaConfig": {"producerConfig": {"linger.ms": "5ms"}}},
            "kafkaConfig.producerConfig.linger.ms: '5ms' is not a number (librdkafka reads it as 5, "
            "Kafka's Java clients refuse it): write 5",
        ),
    ],
)
def test_validate_judges_kafka_sections_by_kafkas_own_definitions(tmp_path, keys, line):
    path = workload_file(tmp_path, **keys)
    result = dimster("validate", path)
    assert result.code == 2 and result.error_lines == [f"dimster: error: {path}: {line}"], result.stderr


def test_a_campaigns_broker_config_typo_is_blamed_on_the_campaign_not_the_environment(project, tmp_path):
    campaign = tmp_path / "c.yaml"
    spec = {
        "name": "c",
        "base": str(REPO / "run" / "workloads" / "quickstart.yaml"),
        "dimensions": [{"key": "brokerConfig.group.share.partition.max.record.lock", "values": [400]}],
    }
    campaign.write_text(yaml.safe_dump(spec))
    result = dimster("campaign", "local", "-c", str(campaign), "--dry-run", env={"DIMSTER_PROJECT_DIR": str(project)})
    assert result.code == 2 and len(result.error_lines) == 1, result.stderr
    [line] = result.error_lines
    assert line.startswith("dimster: error: c.yaml: point 1 ") and "run/environments" not in line, (
        line
    )  # project-relative
    assert "brokerConfig: unknown broker property 'group.share.partition.max.record.lock'" in line, line


@pytest.mark.parametrize(
    ("keys", "line"),
    [
        ({"producerRate": 1e26}, "key 'producerRate': Input should be less than or equal to 1000000000 (got 1e+26)"),
        ({"durationSeconds": 1e23}, "key 'durationSeconds': Input should be less than or equal to 2678400 (got 1e+23)"),
        (
            {
                "acknowledgement": {"mode": "IMPLICIT"},
                "kafkaConfig": {"shareConsumerConfig": {"share.acknowledgement.mode": "explicit"}},
            },
            "kafkaConfig.shareConsumerConfig.share.acknowledgement.mode 'explicit' contradicts acknowledgement.mode "
            "IMPLICIT: dimster acknowledges by acknowledgement.mode and sets Kafka's share.acknowledgement.mode "
            "from it; drop the property (or set acknowledgement.mode)",
        ),
        (
            {
                "acknowledgement": {"mode": "EXPLICIT"},
                "kafkaConfig": {"commonConfig": {"share.acknowledgement.mode": "implicit"}},
            },
            "kafkaConfig.commonConfig.share.acknowledgement.mode 'implicit' contradicts acknowledgement.mode EXPLICIT",
        ),
    ],
)
def test_values_no_test_means_and_contradictions_are_one_line(keys, line):
    from dimster.workload.model import parse_workload

    with pytest.raises(DimsterError) as refused:
        parse_workload({"name": "w", **keys}, "w.yaml")
    assert str(refused.value).startswith(f"w.yaml: {line}"), str(refused.value)


def test_a_matching_acknowledgement_mode_and_a_consumer_section_no_client_reads(tmp_path):
    """Kafka's mode spelt as dimster's is fine; consumerConfig on a share-group run is a note, not silence."""
    path = workload_file(
        tmp_path,
        acknowledgement={"mode": "EXPLICIT"},
        kafkaConfig={
            "shareConsumerConfig": {"share.acknowledgement.mode": "explicit"},
            "consumerConfig": {"max.poll.records": 10},
        },
    )
    result = dimster("validate", path)
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        "note: kafkaConfig.consumerConfig is for consumer-group consumers and this run's consumers are share "
        "consumers: no client reads it, nor checks it"
    )


def test_a_run_above_the_brokers_count_is_refused_before_anything_starts(project, tmp_path):
    path = workload_file(tmp_path, replicationFactor=3)
    results = tmp_path / "results"
    env = {"DIMSTER_PROJECT_DIR": str(project)}
    result = dimster("run", "local", "-w", path, "--results", str(results), env=env)
    assert result.error_lines == ["dimster: error: w.yaml: replicationFactor 3 needs 3 brokers; 'local' has 1"]
    assert result.code == 2 and not results.exists()  # no bundle, no cluster: nothing started
    checked = dimster("validate", path, "--env", "local", env=env)
    assert checked.code == 2 and checked.error_lines == result.error_lines


@pytest.mark.parametrize(
    ("keys", "line"),
    [
        ({"nam": "w"}, "unknown key 'nam' (did you mean 'name'?)"),
        (
            {"name": "w", "faults": [{"atSecond": 5, "action": "kill", "node": 0}]},
            "unknown key 'faults.0.atSecond' (did you mean 'atSeconds'?)",
        ),
        ({"name": "w", "faults": [{"action": "kill", "node": 0}]}, "key 'faults.0.atSeconds': Field required"),
    ],
)
def test_a_misspelt_required_key_is_named_as_written(keys, line):
    from dimster.workload.model import parse_workload

    with pytest.raises(DimsterError) as refused:
        parse_workload(keys, "w.yaml")
    assert str(refused.value) == f"w.yaml: {line}"


def test_a_misspelt_omb_key_is_told_with_omb_s_name_and_a_dimster_key_as_a_mix(tmp_path):
    from dimster.workload.model import load_workload

    omb = {"name": "o", "topics": 1, "subscriptionsPerTopic": 1, "consumerPerSubscription": 1, "testDurationMinutes": 1}
    path = tmp_path / "omb.yaml"
    path.write_text(yaml.safe_dump({**omb, "producerRat": 100}))
    with pytest.raises(
        DimsterError, match=r"unknown OpenMessaging Benchmark key 'producerRat' \(did you mean 'producerRate'\?\)"
    ):
        load_workload(path)
    path.write_text(
        yaml.safe_dump({**omb, "consumersPerGroup": 2})
    )  # dimster's, close to OMB's consumerPerSubscription
    with pytest.raises(DimsterError, match=r"mixes OpenMessaging Benchmark keys .* \(consumersPerGroup\)"):
        load_workload(path)


def test_a_key_has_one_spelling_in_files_as_in_set():
    """The Python name of a key is refused in a workload and a profile, as `--set` refuses it."""
    from dimster.environment import environment_from
    from dimster.workload.model import parse_workload

    with pytest.raises(
        DimsterError,
        match=r"^w.yaml: unknown key 'acknowledgement.release_fraction' \(did you mean 'releaseFraction'\?\)$",
    ):
        parse_workload({"name": "w", "acknowledgement": {"mode": "EXPLICIT", "release_fraction": 0.1}}, "w.yaml")
    with pytest.raises(DimsterError, match=r"unknown key 'broker_port_base' \(did you mean 'brokerPortBase'\?\)"):
        environment_from({"backend": "local", "broker_port_base": 19092}, "mine", "mine.yaml")
    assert parse_workload({"name": "w", "producerRate": 5}, "w.yaml").producer_rate == 5
