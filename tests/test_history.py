"""`dimster history` (results/history.py, cli/history.py): run and campaign folders written by hand as
`dimster run`, `dimster summarize` and `dimster campaign` leave their JSON files; the rows' order,
limit, filter, figures and verdicts, what is skipped, and the CLI's table, JSON and lines. No Kafka,
no Spark."""

import json
from pathlib import Path

import pytest

from dimster.results.history import read_history
from tests.conftest import dimster, one_error_line

pytestmark = pytest.mark.unit


def write_run(
    root: Path,
    name: str,
    started: str,
    *,
    verdict: object = None,  # summary.json's `verdict`: None (no thresholds) or {"passed": ...}
    summarized: bool = True,
    mode: dict | None = None,
    e2e_p99: float = 12.4,
) -> Path:
    """A run folder: run.json as the coordinator writes it, and summary/summary.json as Spark does."""
    run_id = f"{started[:19].replace('-', '').replace(':', '')}Z-{name}"
    run_dir = root / run_id
    (run_dir / "metrics").mkdir(parents=True)
    totals = {"sent": 60_000, "acked": 60_000, "received": 59_990, "duplicates": 0, "lost": 10, "unconsumed": 0}
    info = {
        "run_id": run_id, "workload": name, "environment": "localBeefy", "started": started,
        "versions": {"dimster": "0.1.0", "kafka": "4.3.1", "librdkafka": "2.16.0"},
        "status": "completed", "totals": totals, "mode": mode or {"type": "steady"},
    }  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(info))
    if summarized:
        summary = {
            "run": run_id, "status": "completed", "totals": totals, "notes": [], "mode": info["mode"],
            "throughput": {"seconds": 60, "produced_msgs_per_s": 1000.0, "produced_mb_per_s": 0.5,
                           "consumed_msgs_per_s": 999.8, "consumed_mb_per_s": 0.5},
            "latency_ms": {"e2e": {"count": 59_990, "p50": 4.0, "p99": e2e_p99, "p99_9": 20.0, "max": 31.0},
                           "publish": {"count": 60_000, "p50": 1.0, "p99": 3.5, "p99_9": 5.0, "max": 9.0}},
            "verdict": verdict,
        }  # fmt: skip
        (run_dir / "summary").mkdir()
        (run_dir / "summary" / "summary.json").write_text(json.dumps(summary))
    return run_dir


def threshold_verdict(passed: bool, aborted_by: str | None = None) -> dict:
    result = {
        "threshold": "e2e.p99 < 50ms", "figures": {"e2e.p99": 12.4}, "value": 12.4, "bound": 50.0,
        "unit": "ms", "passed": passed, "abortOnFail": aborted_by is not None, "note": None,
    }  # fmt: skip
    return {"passed": passed, "aborted_by": aborted_by, "thresholds": [result]}


def write_campaign(root: Path, name: str, created: float, statuses: list[str], passed: object = "unsummarized"):
    folder = root / "campaigns" / f"20261201T000000Z-{name}"
    folder.mkdir(parents=True)
    points = [
        {"index": i, "repeat": 1, "values": {"linger.ms": i}, "label": f"linger.ms={i}", "status": status}
        for i, status in enumerate(statuses, start=1)
    ]
    state = {"name": name, "environment": "local", "created": created, "ended": None, "points": points}
    (folder / "campaign.json").write_text(json.dumps(state))
    if passed != "unsummarized":
        (folder / "campaign" / "summary").mkdir(parents=True)
        summary = {"campaign": name, "verdict": None if passed is None else {"passed": passed, "points": []}}
        (folder / "campaign" / "summary" / "summary.json").write_text(json.dumps(summary))
    return folder


def test_rows_are_sorted_by_start_time_newest_last_and_the_limit_keeps_the_newest(tmp_path):
    # folder names sort otherwise than the start times: the order comes from run.json
    write_run(tmp_path, "b", "2026-03-01T09:00:00+00:00")
    write_run(tmp_path, "a", "2026-03-03T09:00:00+00:00")
    write_run(tmp_path, "c", "2026-03-02T09:00:00+00:00")
    write_campaign(tmp_path, "sweep", created=1_772_600_000.0, statuses=["completed"])  # 2026-03-04
    found = read_history(tmp_path, limit=0)
    assert [r["workload"] for r in found.rows] == ["b", "c", "a", "sweep"]
    newest = read_history(tmp_path, limit=2)
    assert [r["workload"] for r in newest.rows] == ["a", "sweep"] and newest.matched == 4


def test_workload_keeps_that_workloads_runs_before_the_limit(tmp_path):
    for day in (1, 2, 3, 4):
        write_run(tmp_path, "quickstart", f"2026-03-0{day}T09:00:00+00:00", e2e_p99=10.0 + day)
    write_run(tmp_path, "other", "2026-03-05T09:00:00+00:00")
    found = read_history(tmp_path, workload="quickstart", limit=3)
    assert [r["e2e.p99"] for r in found.rows] == [12.0, 13.0, 14.0]
    assert found.matched == 4 and found.workloads == ["other", "quickstart"]
    assert read_history(tmp_path, workload="none-such").rows == []


def test_a_run_row_holds_the_key_figures_by_name_from_summary_json(tmp_path):
    write_run(tmp_path, "quickstart", "2026-03-01T09:00:00+00:00")
    (row,) = read_history(tmp_path).rows
    assert row["id"] == "20260301T090000Z-quickstart" and row["kind"] == "run"
    assert (row["environment"], row["kafka"], row["status"]) == ("localBeefy", "4.3.1", "completed")
    assert row["started"] == "2026-03-01T09:00:00+00:00"
    figures = {k: row[k] for k in ("produced.rate", "consumed.rate", "e2e.p99", "publish.p99", "lost")}
    assert figures == {"produced.rate": 1000.0, "consumed.rate": 999.8, "e2e.p99": 12.4, "publish.p99": 3.5, "lost": 10}


@pytest.mark.parametrize(
    ("run", "verdict"),
    [
        ({"verdict": threshold_verdict(True)}, "passed"),
        ({"verdict": threshold_verdict(False)}, "failed"),
        ({"verdict": None}, "none"),  # no thresholds
        ({"summarized": False}, "not summarized"),
        ({"mode": {"type": "correctness", "passed": True, "reasons": []}}, "passed"),
        ({"mode": {"type": "correctness", "passed": False, "reasons": ["3 lost"]}}, "failed"),
        # a correctness verdict that failed fails the run whatever its thresholds say; known without a summary
        ({"verdict": threshold_verdict(True), "mode": {"type": "correctness", "passed": False}}, "failed"),
        ({"summarized": False, "mode": {"type": "correctness", "passed": False}}, "failed"),
    ],
)
def test_the_verdict_of_a_run(tmp_path, run, verdict):
    write_run(tmp_path, "w", "2026-03-01T09:00:00+00:00", **run)
    (row,) = read_history(tmp_path).rows
    assert row["verdict"] == verdict


def test_a_run_without_a_summary_has_no_rates_but_its_lost_count_from_run_json(tmp_path):
    write_run(tmp_path, "w", "2026-03-01T09:00:00+00:00", summarized=False)
    (row,) = read_history(tmp_path).rows
    assert (row["produced.rate"], row["e2e.p99"], row["lost"]) == (None, None, 10)


def test_a_campaign_is_one_row_with_its_points_done_and_its_summarys_verdict(tmp_path):
    write_campaign(tmp_path, "sweep", 1_772_600_000.0, ["completed", "failed", "interrupted", "pending"], False)
    write_campaign(tmp_path, "later", 1_772_700_000.0, ["completed"], None)
    write_campaign(tmp_path, "fresh", 1_772_800_000.0, ["pending"])
    sweep, later, fresh = read_history(tmp_path).rows
    assert sweep["kind"] == "campaign" and sweep["workload"] == "sweep" and sweep["environment"] == "local"
    assert sweep["points"] == {"done": 2, "total": 4} and sweep["status"] == "2/4 points"
    assert sweep["started"] == "2026-03-04T04:53:20+00:00"
    assert (sweep["verdict"], later["verdict"], fresh["verdict"]) == ("failed", "none", "not summarized")


def test_folders_whose_json_cannot_be_read_are_skipped_and_named(tmp_path):
    write_run(tmp_path, "good", "2026-03-01T09:00:00+00:00")
    (write_run(tmp_path, "broken", "2026-03-02T09:00:00+00:00") / "run.json").write_text('{"run_id": "cut')
    (write_run(tmp_path, "listed", "2026-03-03T09:00:00+00:00") / "run.json").write_text("[1, 2]")
    bad_summary = write_run(tmp_path, "halfway", "2026-03-04T09:00:00+00:00")
    (bad_summary / "summary" / "summary.json").write_text("")
    (tmp_path / "20260305T090000Z-cut-short" / "metrics").mkdir(parents=True)  # killed before run.json
    (tmp_path / "notes").mkdir()  # not a run: not listed, not skipped
    found = read_history(tmp_path)
    assert [r["workload"] for r in found.rows] == ["good"]
    assert len(found.skipped) == 4
    assert any(s.startswith("20260302T090000Z-broken: run.json is unreadable") for s in found.skipped)
    assert "20260303T090000Z-listed: run.json is not a JSON object" in found.skipped
    assert any(s.startswith("20260304T090000Z-halfway: summary.json is unreadable") for s in found.skipped)
    assert "20260305T090000Z-cut-short: no run.json" in found.skipped


# ---- the CLI -----------------------------------------------------------------------------------------
def test_the_cli_prints_a_table_in_local_time_and_notes_what_it_skipped(tmp_path):
    write_run(tmp_path, "quickstart", "2026-03-01T09:00:00+00:00", verdict=threshold_verdict(False, "lost == 0"))
    write_run(tmp_path, "quickstart", "2026-03-02T09:00:00+00:00", summarized=False)
    (tmp_path / "20260303T090000Z-broken").mkdir()
    (tmp_path / "20260303T090000Z-broken" / "run.json").write_text("{")
    result = dimster("history", str(tmp_path), env={"TZ": "Asia/Kolkata"})  # UTC+05:30
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    first = next(line for line in lines if "20260301T090000Z-quickstart" in line)
    second = next(line for line in lines if "20260302T090000Z-quickstart" in line)
    assert lines.index(first) < lines.index(second)
    for cell in ("2026-03-01 14:30", "localBeefy", "4.3.1", "1,000", "12.4", "FAILED, stopped early"):
        assert cell in first, first
    assert "not summarized" in second and "2026-03-02 14:30" in second
    assert result.stderr.strip().startswith("note: skipped 1 folder(s) that could not be read: 20260303T090000Z-broken")


def test_the_cli_json_is_a_list_of_rows_with_figure_names_as_keys(tmp_path):
    for day in (1, 2, 3):
        write_run(tmp_path, "quickstart", f"2026-03-0{day}T09:00:00+00:00", verdict=threshold_verdict(True))
    write_run(tmp_path, "other", "2026-03-04T09:00:00+00:00")
    result = dimster("history", str(tmp_path), "--workload", "quickstart", "--limit", "2", "--json")
    assert result.code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == ["20260302T090000Z-quickstart", "20260303T090000Z-quickstart"]
    assert rows[0]["e2e.p99"] == 12.4 and rows[0]["produced.rate"] == 1000.0 and rows[0]["verdict"] == "passed"
    assert set(rows[0]) >= {"kind", "id", "workload", "started", "environment", "kafka", "status", "lost"}
    assert isinstance(rows[0]["lost"], int)  # a count stays a count


def test_the_cli_says_in_one_line_when_there_is_nothing_to_list(tmp_path):
    empty = dimster("history", str(tmp_path))
    assert (empty.code, empty.stdout.strip(), empty.stderr) == (0, f"no runs or campaigns in {tmp_path}", "")
    assert json.loads(dimster("history", str(tmp_path), "--json").stdout) == []
    # the default folder, results/ of the project, before any run
    fresh = dimster("history", env={"DIMSTER_PROJECT_DIR": str(tmp_path)})
    assert fresh.code == 0 and fresh.stdout.strip().startswith("no runs yet:"), fresh.stdout + fresh.stderr
    one_error_line(dimster("history", str(tmp_path / "nowhere")), "nowhere does not exist", code=2)
