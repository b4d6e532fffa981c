"""`dimster validate` on workload files, as a user runs it.

Every file in tests/workloads/bad/ must be refused with exit code 2 and exactly one error line that
names the file and contains what the file's leading `# expect: ...` comment(s) say. A `# xfail: why`
comment marks a known problem that should be fixed (the test then fails once it is). Every
workload shipped under run/workloads/ and every file in tests/workloads/good/ must pass.
"""

from pathlib import Path

import pytest
import yaml

from dimster.workload.model import load_workload
from tests.conftest import REPO, dimster

pytestmark = pytest.mark.unit

HERE = Path(__file__).parent
BAD = sorted((HERE / "workloads" / "bad").glob("*.yaml"))
GOOD = sorted((HERE / "workloads" / "good").glob("*.yaml")) + sorted((REPO / "run" / "workloads").rglob("*.yaml"))


def header(path: Path, tag: str) -> list[str]:
    """The values of the `# tag: value` comments at the top of a file."""
    values = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(f"# {tag}:"):
            values.append(line.split(":", 1)[1].strip())
    return values


def bad_case(path: Path):
    marks = [pytest.mark.xfail(reason=reason, strict=True) for reason in header(path, "xfail")]
    return pytest.param(path, id=path.stem, marks=marks)


def test_the_corpus_is_there():
    assert len(BAD) >= 12
    for path in BAD:
        assert path.read_text().startswith("# expect: "), f"{path.name} must start with '# expect: ...'"
    assert any(path.name == "minimal.yaml" for path in GOOD)


@pytest.mark.parametrize("path", [bad_case(path) for path in BAD])
def test_bad_workload_gives_one_error_line(path):
    result = dimster("validate", str(path.relative_to(REPO)), timeout=60)
    assert "Traceback" not in result.stderr, result.stderr
    assert "internal error" not in result.stderr, result.stderr
    assert result.code == 2, result.stderr
    assert result.stdout == ""
    assert len(result.error_lines) == 1, result.stderr
    line = result.error_lines[0]
    assert path.name in line, line
    for expected in header(path, "expect"):
        assert expected in line, f"expected {expected!r} in {line!r}"


@pytest.mark.parametrize("path", GOOD, ids=lambda p: str(p.relative_to(REPO)))
def test_good_workload_passes(path):
    result = dimster("validate", str(path), timeout=60)
    assert result.code == 0, result.stderr
    assert result.stderr == ""
    assert ": ok: " in result.stdout


def test_good_workload_survives_a_round_trip(tmp_path):
    """What the model dumps is itself a valid workload that reads back the same."""
    for path in GOOD:
        workload = load_workload(path)
        again = tmp_path / path.name
        again.write_text(yaml.safe_dump(workload.to_yaml_dict()))
        assert load_workload(again) == workload


def test_validate_summary():
    result = dimster("validate", "tests/workloads/good/everything.yaml", timeout=60)
    assert result.code == 0, result.stderr
    assert result.stdout.strip().splitlines() == [
        "note: kafkaConfig.consumerConfig is for consumer-group consumers and this run's consumers are share "
        "consumers: no client reads it, nor checks it",  # every key is set, this one too
        "tests/workloads/good/everything.yaml: ok: 'every-key_1.0', 2 topic(s) x 12 partition(s), "
        "6 producer(s) at 5000 msg/s, 16 share group consumer(s)",
    ]


MINIMAL = "tests/workloads/good/minimal.yaml"


@pytest.mark.parametrize(
    "sets",
    [
        ["--set", "producerRate=60000"],
        ["--set", "producerRate", "60000"],
        ["--set", "producerRate=60000", "topics=2"],
        ["-s", "kafkaConfig.producerConfig.batch.size=65536", "-s", "brokerConfig.num.io.threads=16"],
        ["--set", "producerRateSchedule={segments: [{rate: 5, durationSeconds: 1}]}"],
    ],
    ids=["k=v", "k v", "several", "kafka-properties", "mapping"],
)
def test_validate_with_overrides(sets):
    result = dimster("validate", MINIMAL, *sets, timeout=60)
    assert result.code == 0, result.stderr
    assert "ok: 'minimal'" in result.stdout


def test_override_shows_in_the_summary():
    result = dimster("validate", MINIMAL, "--set", "producerRate", "60000", "topics=3", timeout=60)
    assert result.code == 0, result.stderr
    assert "3 topic(s)" in result.stdout and "at 60000 msg/s" in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--set", "producerRate=-1"], ["minimal.yaml", "key 'producerRate': ", "(got -1)"]),
        (["--set", "producerRat=5"], ["minimal.yaml", "unknown key 'producerRat' (did you mean 'producerRate'?)"]),
        (["--set", "producerRate"], ["--set producerRate: needs a value"]),
        (["--set", "=5"], ["not a key path"]),
        (["--set", "name.x=1"], ["--set name.x: 'name' is a value, not a section"]),
        (["stray"], ["unexpected argument(s): stray"]),
    ],
    ids=["bad-value", "unknown-key", "no-value", "no-key", "below-a-value", "stray-argument"],
)
def test_bad_override_gives_one_error_line(args, expected):
    result = dimster("validate", MINIMAL, *args, timeout=60)
    assert "Traceback" not in result.stderr
    assert result.code == 2, result.stderr
    assert len(result.error_lines) == 1, result.stderr
    for fragment in expected:
        assert fragment in result.error_lines[0], result.error_lines[0]


def test_missing_workload_file():
    result = dimster("validate", "tests/workloads/nosuch.yaml", timeout=60)
    assert result.code == 2
    assert len(result.error_lines) == 1
    assert "workload file tests/workloads/nosuch.yaml does not exist" in result.error_lines[0]
