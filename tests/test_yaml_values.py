"""Values read as written (issue 53, item 1): workload, campaign and profile files and `--set` values
are read with YAML 1.2's numbers and booleans (dimster/yamlcore.py), exponents are numbers
everywhere, and a key given twice in a file is one line naming the file, its line and the key."""

import pytest

from dimster import yamlcore
from dimster.campaign.model import load_campaign
from dimster.environment import load_environment
from dimster.workload.model import load_workload
from tests.conftest import dimster, one_error_line, write_environment

pytestmark = pytest.mark.unit


def test_numbers_and_booleans_mean_what_a_person_means():
    read = yamlcore.load("a: 010\nb: 1e6\nc: 1e-05\nd: 0o17\ne: 0x1F\nf: 1_000_000\ng: -.5\nh: true\ni: 12.0")
    assert read == {"a": 10, "b": 1e6, "c": 1e-05, "d": 15, "e": 31, "f": 1_000_000, "g": -0.5, "h": True, "i": 12.0}
    assert all(type(read[k]) is int for k in "adef") and all(type(read[k]) is float for k in "bcgi")
    # YAML 1.1's sexagesimals, yes/no/on/off and dates are the words written
    words = yamlcore.load("a: 1:30\nb: yes\nc: off\nd: 2026-12-03\ne: 12:30:00\nf: 1e\ng: 0b101")
    assert words == {"a": "1:30", "b": "yes", "c": "off", "d": "2026-12-03", "e": "12:30:00", "f": "1e", "g": "0b101"}


def test_what_dimster_writes_it_reads_back_the_same():
    written = {"id": "1e6", "octal": "010", "hex": "0o17", "word": "yes", "rate": 1e-05, "big": 10**20, "on": True}
    assert yamlcore.load(yamlcore.dump(written)) == written


def test_a_workload_reads_010_as_ten_and_1e6_as_a_million(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("name: w\nproducerRate: 1e3\npartitionsPerTopic: 010\n")
    workload = load_workload(path)
    assert (workload.producer_rate, workload.partitions_per_topic) == (1000, 10)
    assert load_workload(path, [("producerRate", "1e6")]).producer_rate == 1_000_000


def test_a_duration_in_minutes_and_seconds_is_refused_in_one_line(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("name: w\ndurationSeconds: 1:30\n")  # YAML 1.1: 90 s, silently
    one_error_line(dimster("validate", str(path)), "w.yaml", "'durationSeconds'", "'1:30'")


def test_set_takes_exponents(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("name: w\n")
    result = dimster("validate", str(path), "--set", "producerRate=2.5e4")  # YAML 1.1: the word '2.5e4'
    assert result.code == 0 and "at 25000 msg/s" in result.stdout, result.stderr + result.stdout


def test_a_campaign_value_in_exponent_notation_reaches_its_point(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: c\nbase: {name: b, consumerProcMsMax: 1}\n"
        "dimensions:\n  - key: consumerProcMsMin\n    values: [0.00001, 1e-3]\n"
    )
    assert [p.workload.consumer_proc_ms_min for p in load_campaign(path).points] == [0.00001, 0.001]


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("workload", "name: w\nproducerRate: 100\ndurationSeconds: 5\nproducerRate: 200\n", 4),
        ("nested", "name: w\nkafkaConfig:\n  producerConfig:\n    acks: all\n    acks: 1\n", 5),
    ],
)
def test_a_key_given_twice_is_one_line_naming_the_file_its_line_and_the_key(tmp_path, name, text, line):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    key = "producerRate" if name == "workload" else "acks"
    said = one_error_line(dimster("validate", str(path)), f"{name}.yaml:{line}:", f"key '{key}' given twice")
    assert "first on line" in said


def test_a_profile_and_a_campaign_are_read_the_same_way(tmp_path, monkeypatch):
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(tmp_path))
    (tmp_path / "run" / "environments").mkdir(parents=True)
    write_environment(tmp_path, "twice", "backend: local\nnodes: 1\nnodes: 3\n")
    with pytest.raises(Exception, match=r"twice\.yaml:3:1: .*key 'nodes' given twice \(first on line 2\)"):
        load_environment("twice")
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: c\nname: d\nbase: {name: b}\n")
    with pytest.raises(Exception, match=r"c\.yaml:2:1: .*key 'name' given twice"):
        load_campaign(campaign)
