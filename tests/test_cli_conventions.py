"""The CLI's conventions (issue 53): a mistyped option is named with the closest one, `--help` lists
every option a command reads, and `-n` counts lines as it does in every log tool."""

import pytest

from tests.conftest import dimster, one_error_line

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("typo", "meant"), [("--dryrun", "--dry-run"), ("--drivr", "--driver"), ("--no-sumary", "--no-summary")]
)
def test_a_mistyped_campaign_option_is_named_with_the_closest_one(typo, meant):
    """Not read as OpenMessaging Benchmark files, with or without -c (the campaign file is not read)."""
    for args in (["-c", "missing.yaml", typo], [typo, "x"]):
        one_error_line(dimster("campaign", "local", *args), f"has no option {typo} (did you mean '{meant}'?)")


def test_the_campaign_help_lists_the_omb_options_it_reads_from_its_arguments():
    result = dimster("campaign", "-h")
    assert result.code == 0, result.stderr
    listed = result.stdout[result.stdout.index("OpenMessaging Benchmark files") :].split()
    assert {"--omb", "--driver", "--set", "--dry-run"} - set(result.stdout.split()) == set()
    assert [word for word in listed if word.startswith("--")] == ["--omb", "--driver", "--set"]


def test_cluster_logs_n_is_the_number_of_last_lines_as_tails(tmp_path):
    log = tmp_path / "clusters" / "local" / "node-1" / "logs" / "server.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = dimster("cluster", "logs", "local", "-n", "3", env={"DIMSTER_STATE_DIR": str(tmp_path)})
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines() == ["[1] line 8", "[1] line 9", "[1] line 10"]
    by_node = dimster("cluster", "logs", "local", "--node", "1", "-n", "1", env={"DIMSTER_STATE_DIR": str(tmp_path)})
    assert by_node.stdout.splitlines() == ["[1] line 10"], by_node.stderr
