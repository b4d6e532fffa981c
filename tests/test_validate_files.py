"""`dimster validate` of every file a user writes (issue 53, item 4): a campaign file (each point's
workload), an environment profile, a workload; `--json` prints what the file resolved to, secrets
masked, on stdout alone; `campaign --dry-run --json` the points with the workload each runs."""

import json
import shutil

import pytest
import yaml

from tests.cli import REPO, dimster

pytestmark = pytest.mark.unit


def test_a_campaign_file_is_validated_point_by_point_and_its_json_holds_each_points_workload(tmp_path):
    shutil.copytree(REPO / "run" / "workloads", tmp_path / "workloads")
    campaign = tmp_path / "campaigns" / "c.yaml"
    campaign.parent.mkdir()
    spec = {
        "name": "c",
        "base": "../workloads/quickstart.yaml",
        "dimensions": [{"key": "producerRate", "values": [100, 2e3]}],
    }
    campaign.write_text(yaml.safe_dump(spec))
    result = dimster("validate", str(campaign), "--json")
    assert result.code == 0, result.stderr
    assert result.stderr.strip() == f"{campaign}: ok: campaign 'c', 2 run(s)"
    document = json.loads(result.stdout)
    assert [p["workload"]["producerRate"] for p in document["points"]] == [100, 2000]
    assert (
        document["points"][1]["values"] == {"producerRate": 2000}
        and document["points"][0]["workload"]["name"] == "c-p1"
    )

    spec["dimensions"][0]["values"] = [100, -5]
    campaign.write_text(yaml.safe_dump(spec))
    bad = dimster("validate", str(campaign))
    assert bad.code == 2 and len(bad.error_lines) == 1 and "point 2 (producerRate=-5)" in bad.error_lines[0], bad.stderr
    refused = dimster("validate", str(campaign), "--set", "producerRate=5")
    assert refused.code == 2 and refused.error_lines == [
        f"dimster: error: {campaign} is a campaign file: --set is for a workload, --env for a workload or a campaign"
    ]


def test_an_environment_profile_is_validated_as_its_backend_reads_it(tmp_path):
    profile = tmp_path / "mine.yaml"
    shutil.copy(REPO / "run" / "environments" / "local.yaml", profile)
    result = dimster("validate", str(profile), "--json")
    assert result.code == 0, result.stderr
    assert result.stderr.strip() == f"{profile}: ok: environment 'mine', backend local, 1 node(s), Kafka 4.4.0"
    assert json.loads(result.stdout)["brokerPortBase"] == 19092
    profile.write_text(profile.read_text() + "brokerPortBsae: 1\n")
    bad = dimster("validate", str(profile))
    assert bad.code == 2 and len(bad.error_lines) == 1, bad.stderr
    assert (
        str(profile) in bad.error_lines[0]
        and "brokerPortBsae" in bad.error_lines[0]
        and "brokerPortBase" in bad.error_lines[0]
    )


def test_a_workloads_json_is_the_resolved_workload_with_its_secrets_masked(tmp_path):
    password = "pl4nted-Secret-9"
    result = dimster(
        "validate", str(REPO / "run" / "workloads" / "quickstart.yaml"), "--json",
        "--set", f"kafkaConfig.commonConfig.sasl.password={password}", "producerRate=1e3",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    workload = json.loads(result.stdout)
    assert workload["producerRate"] == 1000 and workload["reportIntervalSeconds"] > 0  # defaults filled in
    assert workload["kafkaConfig"]["commonConfig"]["sasl.password"] != password
    assert password not in result.stdout + result.stderr


def test_a_campaigns_dry_run_prints_its_points_as_json(tmp_path):
    result = dimster(
        "campaign", "local", "-c", str(REPO / "run" / "campaigns" / "compression.yaml"), "--dry-run", "--json"
    )
    assert result.code == 0, result.stderr
    points = json.loads(result.stdout)["points"]
    assert len(points) == 10 and {
        p["workload"]["kafkaConfig"]["producerConfig"]["compression.type"] for p in points
    } == {"none", "gzip", "snappy", "lz4", "zstd"}


@pytest.mark.parametrize(
    ("keys", "line"),
    [
        ({"producerRate": None}, "key 'producerRate': Input should be a valid number (got null)"),
        ({"kafkaConfig": 5}, "key 'kafkaConfig': Input should be a valid dictionary (got 5)"),
        (
            {"clientLibrary": {"producer": ["java"]}},
            "key 'clientLibrary.producer': Input should be 'librdkafka' or 'java' (got [\"java\"])",
        ),
        (
            {"deadLetterQueue": {"enabled": True, "copyRecord": [True]}},
            "key 'deadLetterQueue.copyRecord': Input should be a valid boolean (got [true])",
        ),
        # the member of a tagged union is the file's `type`, not a level of keys: `mode.x`, not `mode.correctness.x`
        (
            {"mode": {"type": "correctness", "allowDuplicate": True}},
            "unknown key 'mode.allowDuplicate' (did you mean 'allowDuplicates'?)",
        ),
    ],
)
def test_a_bad_value_is_told_as_yaml_writes_it_never_as_python_does(keys, line):
    from dimster.errors import DimsterError
    from dimster.workload.model import parse_workload

    with pytest.raises(DimsterError) as refused:
        parse_workload({"name": "w", **keys}, "w.yaml")
    assert str(refused.value) == f"w.yaml: {line}"
    assert not any(python in str(refused.value) for python in ("None", "True", "instance of", "['"))
