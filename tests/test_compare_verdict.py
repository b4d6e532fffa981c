"""`dimster compare BASELINE CANDIDATE --verdict`: per figure better, worse, the same or undecided, on
synthetic folders as `dimster summarize` leaves them (no Kafka, no Spark): campaigns whose summary
holds a runs table with 4 or 2 repeats a point, and runs whose per-second tables make the latency
of the candidate two and a half times the baseline's."""

import json
from pathlib import Path

import pandas as pd
import pytest
from cli import dimster
from junitparser import JUnitXml
from report_runs import Scenario, write_run

from dimster.errors import DimsterError
from dimster.verdict.compare import compare_verdict, parse_tolerances, regression_line, tolerance
from dimster.verdict.figures import FIGURES

pytestmark = pytest.mark.unit

BASE_P99 = [20.0, 21.0, 22.0, 23.0]


# ---- synthetic campaigns ------------------------------------------------------------------------------------
def run_row(point: int, repeat: int, p99: float, lost: float = 0.0) -> dict:
    """A row of campaign/summary/runs as campaign_summary writes it (the columns a comparison reads)."""
    return {
        "point": point, "repeat": repeat, "label": f"linger.ms={point * 5}", "linger.ms": point * 5,
        "status": "completed", "bundle": f"p{point}-r{repeat}", "measured_seconds": 60.0,
        "produced_msgs_per_s": 1000.0 + repeat, "produced_mb_per_s": 0.5,
        "consumed_msgs_per_s": 1000.0 - repeat, "consumed_mb_per_s": 0.5,
        "e2e_p50_ms": p99 / 3, "e2e_p99_ms": p99, "e2e_p99_9_ms": p99 * 1.5, "publish_p99_ms": 4.0 + repeat / 10,
        "sent": 60000.0, "acked": 60000.0, "received": 60000.0, "lost": lost, "unconsumed": 0.0,
        "duplicates": 0.0, "dead_lettered": float("nan"),
    }  # fmt: skip


def write_campaign(folder: Path, points: dict[int, list[float]], lost: float = 0.0) -> Path:
    """A campaign folder with its summary: per point, the e2e p99 of each repeat."""
    summary_dir = folder / "campaign" / "summary"
    summary_dir.mkdir(parents=True)
    (folder / "campaign.json").write_text(json.dumps({"name": folder.name, "points": []}))
    rows = [run_row(point, i + 1, p99, lost) for point, p99s in points.items() for i, p99 in enumerate(p99s)]
    pd.DataFrame(rows).to_parquet(summary_dir / "runs.parquet", index=False)
    summary = {
        "campaign": folder.name,
        "dimensions": ["linger.ms"],
        "points": [
            {"point": point, "label": f"linger.ms={point * 5}", "values": {"linger.ms": point * 5}, "repeats": len(p)}
            for point, p in points.items()
        ],
        "notes": [],
    }
    (summary_dir / "summary.json").write_text(json.dumps(summary))
    return folder


def figure(result: dict, name: str, point: int = 0) -> dict:
    return next(f for f in result["points"][point]["figures"] if f["figure"] == name)


def test_four_repeats_a_side_find_a_regression(tmp_path: Path) -> None:
    base = write_campaign(tmp_path / "base", {1: BASE_P99})
    cand = write_campaign(tmp_path / "cand", {1: [40.0, 42.0, 44.0, 46.0]})
    result = compare_verdict(base, cand, {})
    assert result["regression"] is True
    assert [p["label"] for p in result["points"]] == ["point 1 (linger.ms=5)"]
    p99 = figure(result, "e2e.p99")
    assert p99["verdict"] == "worse" and p99["test"] == "repeats" and p99["samples"] == [4, 4]
    assert p99["baseline"] == 21.5 and p99["candidate"] == 43.0 and p99["change"] == 1.0
    assert p99["p_worse"] == pytest.approx(1 / 70) and p99["p_better"] == 1.0
    assert p99["tolerance"] == "10%" and "+100% beyond the 10% tolerance" in p99["reason"]
    assert figure(result, "publish.p99")["verdict"] == "same"  # the same repeats on both sides
    assert figure(result, "lost")["test"] == "none" and figure(result, "lost")["verdict"] == "same"
    names = [f["figure"] for f in result["points"][0]["figures"]]
    assert "dead_lettered" not in names  # neither side has a dead-letter queue
    assert regression_line(result) == (
        "regression: e2e.p50 (+100%, p=0.014), e2e.p99 (+100%, p=0.014), e2e.p99.9 (+100%, p=0.014)"
    )


def test_four_repeats_a_side_find_no_regression_when_the_values_mingle(tmp_path: Path) -> None:
    base = write_campaign(tmp_path / "base", {1: BASE_P99, 2: [30.0, 31.0, 32.0, 33.0]})
    cand = write_campaign(tmp_path / "cand", {1: [20.5, 21.5, 22.5, 23.5], 2: [15.0, 15.5, 16.0, 16.5]})
    result = compare_verdict(base, cand, {})
    assert result["regression"] is False
    first = figure(result, "e2e.p99")
    assert first["verdict"] == "same" and first["reason"] == "within the 10% tolerance"
    assert 0.05 < first["p_worse"] < 1
    second = figure(result, "e2e.p99", point=1)  # 50% faster, and every repeat of it: better
    assert second["verdict"] == "better" and second["p_better"] == pytest.approx(1 / 70)
    assert regression_line(result) == "no regression"


def test_two_repeats_a_side_say_too_few_rather_than_guess(tmp_path: Path) -> None:
    base = write_campaign(tmp_path / "base", {1: [20.0, 21.0]})
    cand = write_campaign(tmp_path / "cand", {1: [80.0, 90.0]}, lost=3.0)
    result = compare_verdict(base, cand, {})
    p99 = figure(result, "e2e.p99")
    assert p99["verdict"] == "undecided" and p99["test"] == "none" and p99["p_worse"] is None
    assert p99["reason"] == "too few repeats (2 and 2): 4 a side tell a difference at 95%; per-interval samples: none"
    lost = figure(result, "lost")  # a count needs no test: 3 lost against none is worse
    assert lost["verdict"] == "worse" and lost["baseline"] == 0.0 and lost["candidate"] == 3.0
    assert result["regression"] is True
    assert regression_line(result) == "regression: lost (+3)"


def test_points_match_by_their_dimension_values_and_the_rest_are_notes(tmp_path: Path) -> None:
    base = write_campaign(tmp_path / "base", {1: BASE_P99, 2: BASE_P99})
    cand = write_campaign(tmp_path / "cand", {2: BASE_P99, 3: BASE_P99})
    result = compare_verdict(base, cand, {})
    assert [p["label"] for p in result["points"]] == ["point 2 (linger.ms=10)"]
    assert result["notes"] == [
        "the baseline's point 1 (linger.ms=5) has no point with its values in the candidate",
        "the candidate's point 3 (linger.ms=15) has no point with its values in the baseline",
    ]
    other = write_campaign(tmp_path / "other", {3: BASE_P99})
    with pytest.raises(DimsterError, match="has no point with the dimension values of a point of"):
        compare_verdict(base, other, {})


# ---- runs: the per-second samples decide -----------------------------------------------------------------------
def slower_run(root: Path, factor: float) -> Path:
    """A run like Scenario()'s whose end-to-end latencies, per second and overall, are `factor` times."""
    run_dir = write_run(root, Scenario())
    latency = pd.read_csv(run_dir / "summary" / "latency_per_second.csv")
    stats = [c for c in latency.columns if c.startswith("p") or c == "max"]
    latency.loc[latency.metric == "e2e", stats] *= factor
    latency.to_csv(run_dir / "summary" / "latency_per_second.csv", index=False)
    summary = json.loads((run_dir / "summary" / "summary.json").read_text())
    e2e = summary["latency_ms"]["e2e"]
    summary["latency_ms"]["e2e"] = {k: v if k == "count" else v * factor for k, v in e2e.items()}
    (run_dir / "summary" / "summary.json").write_text(json.dumps(summary))
    return run_dir


def test_two_runs_find_a_regression_through_their_measured_seconds(tmp_path: Path) -> None:
    base, cand = write_run(tmp_path, Scenario()), slower_run(tmp_path, 2.5)
    result = compare_verdict(base, cand, {})
    assert [p["label"] for p in result["points"]] == ["run"]
    p99 = figure(result, "e2e.p99")
    measured = 80  # seconds 10 to 89 of Scenario()
    assert p99["test"] == "intervals" and p99["samples"] == [measured, measured]
    assert p99["verdict"] == "worse" and p99["change"] == 1.5 and p99["p_worse"] < 0.001
    rates = [figure(result, name) for name in ("produced.rate", "consumed.rate", "publish.p99")]
    assert [(f["test"], f["verdict"]) for f in rates] == [("intervals", "same")] * 3
    assert result["regression"] is True
    # the same run against itself: nothing moved
    same = compare_verdict(base, base, {})
    assert not same["regression"]
    assert {f["verdict"] for f in same["points"][0]["figures"]} == {"same"}


def test_a_tolerance_sets_how_far_a_figure_may_move(tmp_path: Path) -> None:
    base, cand = write_run(tmp_path, Scenario()), slower_run(tmp_path, 1.08)
    assert figure(compare_verdict(base, cand, {}), "e2e.p99")["verdict"] == "same"  # +8%: within 10%
    strict = compare_verdict(base, cand, {"e2e.p99": "5%", "e2e.p75": "1ms"})
    assert figure(strict, "e2e.p99")["tolerance"] == "5%" and figure(strict, "e2e.p99")["verdict"] == "worse"
    assert figure(strict, "e2e.p75")["tolerance"] == "1ms"  # a figure named in --tolerance is compared
    wide = {"e2e.p99": "100000ms", "e2e.p50": "200%", "e2e.p99.9": "200%"}
    loose = compare_verdict(base, slower_run(tmp_path, 2.5), wide)
    assert not loose["regression"]
    assert figure(loose, "e2e.p99")["reason"] == "within the 100000ms tolerance"


def test_a_move_beyond_the_tolerance_that_the_repeats_do_not_bear_out_is_the_same(tmp_path: Path) -> None:
    base = write_campaign(tmp_path / "base", {1: BASE_P99})
    cand = write_campaign(tmp_path / "cand", {1: [19.5, 24.0, 24.5, 25.0]})  # +8% on average, mingled
    p99 = figure(compare_verdict(base, cand, {"e2e.p99": "5%"}), "e2e.p99")
    assert p99["verdict"] == "same" and p99["p_worse"] == pytest.approx(6 / 35)
    assert p99["reason"] == "+8% beyond the 5% tolerance, but not significant: p=0.17 >= 0.05"


# ---- tolerances and bad input --------------------------------------------------------------------------------
def test_tolerances_parse_and_each_bad_one_is_one_line() -> None:
    assert parse_tolerances(["e2e.p99=10%", "consumed.rate = 50msg/s"]) == {
        "e2e.p99": "10%", "consumed.rate": "50msg/s",
    }  # fmt: skip
    relative, absolute = tolerance(FIGURES["e2e.p99"], "10%"), tolerance(FIGURES["e2e.p99"], "2s")
    assert relative.relative and relative.allowed(-40.0) == pytest.approx(4.0)
    assert not absolute.relative and absolute.allowed(40.0) == 2000.0
    assert tolerance(FIGURES["lost"], "5").allowed(100.0) == 5.0
    with pytest.raises(DimsterError, match=r"^--tolerance e2e\.p98=10%: unknown figure 'e2e\.p98' \(did you mean"):
        parse_tolerances(["e2e.p98=10%"])
    with pytest.raises(DimsterError, match=r"^--tolerance e2e\.p99: expected FIGURE=VALUE, as e2e\.p99=10%"):
        parse_tolerances(["e2e.p99"])
    with pytest.raises(DimsterError) as error:
        tolerance(FIGURES["e2e.p99"], "5msg/s")
    assert str(error.value) == (
        "--tolerance e2e.p99=5msg/s: e2e.p99 is in ms; give a percentage or an amount in ms, as 10% or 5ms"
    )
    with pytest.raises(DimsterError) as error:
        tolerance(FIGURES["lost"], "5ms")
    assert str(error.value) == "--tolerance lost=5ms: lost is a count; give a percentage or a number, as 0 or 10%"
    with pytest.raises(DimsterError, match=r"^--tolerance consumed\.rate=-5%: unexpected '-' at column 1"):
        tolerance(FIGURES["consumed.rate"], "-5%")
    with pytest.raises(DimsterError, match=r"^--tolerance e2e\.p99=fast: "):
        tolerance(FIGURES["e2e.p99"], "fast")


def test_bad_folders_are_one_error_line(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, Scenario())
    campaign = write_campaign(tmp_path / "camp", {1: BASE_P99})
    mixed = rf"^compare --verdict compares two runs or two campaigns: {run_dir} is a run, {campaign} a campaign$"
    with pytest.raises(DimsterError, match=mixed):
        compare_verdict(run_dir, campaign, {})
    (tmp_path / "empty").mkdir()
    with pytest.raises(DimsterError, match="is neither a dimster run folder"):
        compare_verdict(run_dir, tmp_path / "empty", {})
    (campaign / "campaign" / "summary" / "runs.parquet").unlink()
    with pytest.raises(DimsterError, match=r"no campaign summary yet; run `dimster summarize .*camp` first"):
        compare_verdict(campaign, campaign, {})
    (run_dir / "summary" / "summary.json").unlink()
    with pytest.raises(DimsterError, match=r"no summary yet; run `dimster summarize .*` first"):
        compare_verdict(run_dir, run_dir, {})


# ---- the command -------------------------------------------------------------------------------------------------
def test_the_command_exits_9_on_a_regression_0_without_and_2_on_bad_input(tmp_path: Path) -> None:
    base = write_campaign(tmp_path / "base", {1: BASE_P99})
    worse = write_campaign(tmp_path / "worse", {1: [40.0, 42.0, 44.0, 46.0]})
    html = tmp_path / "verdict.html"
    junit = tmp_path / "compare.xml"
    result = dimster("compare", str(base), str(worse), "--verdict", "--json", "-o", str(html), "--junit", str(junit))
    assert result.code == 9, result.stderr
    [suite] = list(JUnitXml.fromfile(str(junit)))  # written before the exit
    assert suite.failures == 3 and sorted(c.name for c in suite if c.result) == ["e2e.p50", "e2e.p99", "e2e.p99.9"]
    verdict = json.loads(result.stdout)
    assert verdict["regression"] is True and verdict["baseline"] == str(base)
    assert result.error_lines == [
        "dimster: error: regression: e2e.p50 (+100%, p=0.014), e2e.p99 (+100%, p=0.014), e2e.p99.9 (+100%, p=0.014)"
    ]
    assert html.is_file() and '<span class="verdict worse">worse</span>' in html.read_text()

    allowed = ["--tolerance", "e2e.p50=150%", "--tolerance", "e2e.p99=150%", "--tolerance", "e2e.p99.9=40ms"]
    result = dimster("compare", str(base), str(worse), "--verdict", *allowed, "-o", str(html))
    assert result.code == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "no regression"
    assert "e2e.p99.9" in result.stdout and "same" in result.stdout

    result = dimster("compare", str(base), str(worse), "--verdict", "--tolerance", "e2e.p999=10%")
    assert result.code == 2
    assert result.error_lines == [
        "dimster: error: --tolerance e2e.p999=10%: unknown figure 'e2e.p999' (did you mean 'e2e.p99.9'?)"
    ]
    result = dimster("compare", str(base), str(worse), str(worse), "--verdict")
    assert result.code == 2
    assert result.error_lines == [
        "dimster: error: compare --verdict takes two folders, a baseline and a candidate (got 3)"
    ]
    result = dimster("compare", str(base), str(worse), "--json")
    assert result.code == 2
    expected = "dimster: error: --tolerance, --json, --junit and --judge-saturated go with --verdict"
    assert result.error_lines == [expected]


def test_the_html_comparison_of_two_runs_marks_each_verdict(tmp_path: Path) -> None:
    runs = tmp_path / "results"
    runs.mkdir()
    base, cand = write_run(runs, Scenario()), slower_run(runs, 2.5)
    html = tmp_path / "cmp.html"
    result = dimster("compare", str(base), str(cand), "--verdict", "-o", str(html))
    assert result.code == 9, result.stderr
    assert result.error_lines[0].startswith("dimster: error: regression: e2e.p50 (+150%, p=")
    page = html.read_text()
    assert '<section id="verdict">' in page and '<section id="key-numbers">' in page
    assert page.count('class="verdict-worse"') == 3  # e2e p50, p99, p99.9 in the key table
    assert page.count('class="verdict-same"') >= 5
    plain = tmp_path / "plain.html"
    assert dimster("compare", str(base), str(cand), "-o", str(plain)).code == 0
    assert 'id="verdict"' not in plain.read_text() and "verdict-" not in plain.read_text()
