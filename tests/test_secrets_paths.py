"""A secret on every path but a run's: a campaign dimension over a secret key (its values, numbers too,
shown as `***N` in campaign.yaml, campaign.json, the page and the console, the points still apart),
a validation error about a secret key's value, and `run --detach` handing its `--set` pairs to its
child over a pipe."""

import json
import subprocess
import sys

import pytest
import yaml

from dimster.campaign.model import load_campaign
from dimster.campaign.runner import CampaignFolder
from dimster.report.campaign_page import write_campaign_page
from tests.conftest import REPO, dimster, files_holding

pytestmark = pytest.mark.unit

WORD = "dimster-secret-5f1c9a2e"  # fixed: parameters name tests alike in every pytest-xdist worker
NUMBER = 904_217  # YAML reads it as a number
PASSWORD, KEY_PASSWORD = "kafkaConfig.commonConfig.sasl.password", "kafkaConfig.producerConfig.ssl.key.password"
BASE = {"name": "base", "producerRate": 100, "durationSeconds": 2}


def write_campaign(folder, dimensions):
    path = folder / "campaign.yaml"
    path.write_text(yaml.safe_dump({"name": "secret", "base": BASE, "dimensions": dimensions}))
    return path


@pytest.fixture
def campaign(tmp_path):
    return load_campaign(
        write_campaign(
            tmp_path,
            [
                {"key": PASSWORD, "values": [WORD, NUMBER]},
                {"keys": ["producerRate", KEY_PASSWORD], "values": [[100, NUMBER + 1], [200, WORD + "x"]]},
            ],
        )
    )


def test_a_secret_dimension_shows_its_values_by_place_and_runs_them(campaign):
    assert [p.label for p in campaign.points] == [
        "sasl.password=***1, producerRate=100, ssl.key.password=***1",
        "sasl.password=***1, producerRate=200, ssl.key.password=***2",
        "sasl.password=***2, producerRate=100, ssl.key.password=***1",
        "sasl.password=***2, producerRate=200, ssl.key.password=***2",
    ]
    assert campaign.points[3].values == {PASSWORD: "***2", "producerRate": 200, KEY_PASSWORD: "***2"}
    config = campaign.points[3].workload.kafka_config
    assert (config.common_config["sasl.password"], config.producer_config["ssl.key.password"]) == (NUMBER, WORD + "x")


def test_the_campaign_folder_and_page_hold_no_secret_and_tell_the_points_apart(campaign, tmp_path):
    folder = CampaignFolder.create(tmp_path / "campaigns", campaign, "local")
    write_campaign_page(folder.path)
    secrets_ = [WORD, str(NUMBER), str(NUMBER + 1)]
    assert files_holding(folder.path, secrets_) == []
    recorded = yaml.safe_load((folder.path / "campaign.yaml").read_text())
    assert recorded["dimensions"][0] == {"key": PASSWORD, "values": ["***1", "***2"]}
    assert recorded["dimensions"][1]["values"] == [[100, "***1"], [200, "***2"]]
    state = json.loads((folder.path / "campaign.json").read_text())
    assert state["dimensions"][0] == {"keys": [PASSWORD], "values": [["***1"], ["***2"]]}
    assert [p["values"][PASSWORD] for p in state["points"]] == ["***1", "***1", "***2", "***2"]
    assert len({p["label"] for p in state["points"]}) == 4
    page = (folder.path / "campaign.html").read_text()
    assert "sasl.password=***2, producerRate=100, ssl.key.password=***1" in page


def test_a_points_failure_naming_its_secret_is_masked_in_campaign_json(campaign, tmp_path):
    folder = CampaignFolder.create(tmp_path / "campaigns", campaign, "local")
    folder.learn_secrets(campaign)  # as running the campaign does
    folder.state["points"][3]["failure"] = f"a client said: bad password {WORD}x and {NUMBER}"
    folder.save()
    assert files_holding(folder.path, [WORD, str(NUMBER)]) == []
    assert json.loads((folder.path / "campaign.json").read_text())["points"][3]["failure"] == (
        "a client said: bad password *** and ***"
    )


def test_a_campaign_resumes_with_other_values_of_its_secret(campaign, tmp_path):
    """Its fingerprint is made from what campaign.yaml records: a hash of a secret is no record of it."""
    folder = CampaignFolder.create(tmp_path / "campaigns", campaign, "local")
    (tmp_path / "other").mkdir()
    dimensions = [
        {"key": PASSWORD, "values": ["another", 12345678]},
        {"keys": ["producerRate", KEY_PASSWORD], "values": [[100, "one-more"], [200, "and-one-more"]]},
    ]
    folder.check_matches(load_campaign(write_campaign(tmp_path / "other", dimensions)), "local")


@pytest.mark.parametrize(
    ("dimension", "expected"),
    [
        ({"key": PASSWORD, "values": WORD}, "key 'dimensions.0': 'values' is a list of the dimension's values"),
        ({"keys": ["producerRate", PASSWORD], "values": [[1, WORD, 2]]}, "is a list of 2 values, got ***1"),
        ({"key": PASSWORD, "values": [[WORD]]}, "key 'kafkaConfig.commonConfig.sasl.password': needs a single"),
    ],
)
def test_a_bad_secret_dimension_is_one_line_without_its_value(tmp_path, dimension, expected):
    result = dimster("campaign", "local", "-c", str(write_campaign(tmp_path, [dimension])), "--dry-run")
    assert result.code == 2, result.stdout
    [line] = result.error_lines
    assert expected in line and WORD not in line


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"[{WORD}]", "needs a single value (a number, word or boolean) (got ***)"),
        (f"{{a: {WORD}}}", "needs a single value (a number, word or boolean)"),
        (".inf", "must be a finite number (got ***)"),
    ],
)
def test_a_bad_value_of_a_secret_key_is_named_by_its_key_not_shown(tmp_path, value, expected):
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(BASE))
    for args in (["--set", f"{PASSWORD}={value}"], ["--set", PASSWORD, value]):
        result = dimster("validate", str(tmp_path / "w.yaml"), *args)
        assert result.code == 2, result.stdout
        [line] = result.error_lines
        assert f"key '{PASSWORD}': {expected}" in line and WORD not in line


def test_a_detached_runs_child_takes_its_sets_from_its_stdin(tmp_path):
    """What `run --detach` starts: its --set pairs come over the pipe (here one that makes the
    workload invalid, so the child ends at once, naming the key it read there)."""
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(BASE))
    command = [sys.executable, "-m", "dimster", "run", "local", "-w", str(tmp_path / "w.yaml"), "--sets-on-stdin"]
    handoff = {"sets": [["producerRate", "-5"], [PASSWORD, WORD]], "argv": ["dimster", "run", "local"]}
    child = subprocess.run(command, input=json.dumps(handoff), capture_output=True, text=True, cwd=REPO, timeout=60)
    assert child.returncode == 2 and "key 'producerRate'" in child.stderr, child.stderr
    garbage = subprocess.run(command, input="producerRate=5", capture_output=True, text=True, cwd=REPO, timeout=60)
    assert garbage.returncode == 2 and garbage.stderr.strip() == (
        "dimster: error: --sets-on-stdin reads what `dimster run --detach` writes, not this"
    )
