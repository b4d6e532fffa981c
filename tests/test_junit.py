"""dimster's JUnit XML, read back with junitparser (a reader the writer did not come from): the
counts, names, outcomes, messages and properties a CI system shows."""

from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from dimster.errors import DimsterError
from dimster.results.junit import Case, Suite, campaign_suites, comparison_suites, run_suite, write_junit
from dimster.verdict.judge import quantity

RUN_INFO = {
    "run_id": "20261201T100000Z-b",
    "workload": "b",
    "environment": "local",
    "started": "2026-12-01T10:00:00.250000+00:00",
    "ended": 1796119230.25,  # 30 s after started
    "load_started": 1796119205.0,
    "versions": {"kafka": "4.4.0", "dimster": "0.9"},
    "status": "completed",
}


def threshold(text, value, bound, unit, passed, figures=None, note=None, **more):
    return {
        "threshold": text,
        "figures": figures or {},
        "value": value,
        "bound": bound,
        "unit": unit,
        "passed": passed,
        "abortOnFail": False,
        "note": note,
        **more,
    }


def consumption_short(**more):
    """The consumption threshold, failed: 333.1 msg/s consumed against the 380.19 it needed."""
    figures = {"consumed.rate": 333.1, "produced.rate": 400.2}
    return threshold("consumed.rate >= 0.95 * produced.rate", 333.1, 380.19, "msg/s", False, figures, **more)


RUN_VERDICT = {
    "passed": False,
    "aborted_by": None,
    "thresholds": [
        threshold("e2e.p99 < 50ms", 12.3, 50.0, "ms", True, {"e2e.p99": 12.3}),
        consumption_short(),
        threshold(
            "publish.p99.9 < 200ms",
            None,
            200.0,
            "ms",
            False,
            {"publish.p99.9": None},
            note="no value: the summary has no publish.p99.9",
        ),
        threshold("lost == 0", 0, 0, "", True, {"lost": 0}),
    ],
}


def read(path: Path):
    """{suite name: suite} and the root, as junitparser reads the file."""
    xml = JUnitXml.fromfile(str(path))
    return {suite.name: suite for suite in xml}, xml


def cases(suite) -> dict:
    return {case.name: case for case in suite}


def counts(suite) -> tuple[int, int, int, int]:
    return suite.tests, suite.failures, suite.errors, suite.skipped


@pytest.mark.unit
def test_a_run_is_one_suite_with_a_case_per_threshold(tmp_path):
    path = tmp_path / "junit.xml"
    write_junit([run_suite(RUN_VERDICT, RUN_INFO)], path)
    suites, xml = read(path)
    assert (xml.name, xml.tests, xml.failures, xml.errors, xml.skipped) == ("dimster", 4, 1, 1, 0)
    suite = suites["thresholds: b (20261201T100000Z-b)"]
    assert counts(suite) == (4, 1, 1, 0)
    assert suite.timestamp == "2026-12-01T10:00:00" and suite.time == 30.0
    assert {p.name: p.value for p in suite.properties()} == {
        "run": "20261201T100000Z-b",
        "workload": "b",
        "environment": "local",
        "kafka": "4.4.0",
    }
    by_name = cases(suite)
    assert list(by_name) == [t["threshold"] for t in RUN_VERDICT["thresholds"]]
    assert {case.classname for case in suite} == {"dimster.thresholds.b"}

    failed = by_name["consumed.rate >= 0.95 * produced.rate"]
    [failure] = failed.result
    assert isinstance(failure, Failure) and failure.type == "threshold"
    assert failure.message == "consumed.rate = 333.1 msg/s, not >= 380.19 msg/s"
    assert failed.system_out == "produced.rate = 400.2 msg/s"

    [error] = by_name["publish.p99.9 < 200ms"].result
    assert isinstance(error, Error) and error.message == "no value: the summary has no publish.p99.9"

    passed = by_name["e2e.p99 < 50ms"]
    assert passed.is_passed and passed.system_out == "e2e.p99 = 12.3 ms, < 50 ms"
    assert by_name["lost == 0"].is_passed and by_name["lost == 0"].system_out == "lost = 0, == 0"


@pytest.mark.unit
def test_the_threshold_that_stopped_a_run_is_named_in_its_property_and_message(tmp_path):
    stopper = threshold("duplicates == 0", 3, 0, "", False, {"duplicates": 3}, abortOnFail=True)
    verdict = {"passed": False, "aborted_by": "duplicates == 0", "thresholds": [stopper]}
    write_junit([run_suite(verdict, RUN_INFO)], tmp_path / "j.xml")
    [suite] = read(tmp_path / "j.xml")[0].values()
    assert {p.name: p.value for p in suite.properties()}["aborted_by"] == "duplicates == 0"
    [failure] = cases(suite)["duplicates == 0"].result
    assert failure.message == "duplicates = 3, not == 0; it stopped the run early (abortOnFail)"


@pytest.mark.unit
def test_a_campaign_is_a_suite_per_point_and_a_point_that_did_not_complete_is_an_error(tmp_path):
    consumed = consumption_short(repeats=[331.0, 335.2])
    latency = threshold("e2e.p99 < 50ms", 20.5, 50.0, "ms", True, {"e2e.p99": 20.5}, repeats=[20.0, 21.0])
    verdict = {
        "passed": False,
        "points": [
            {"point": 1, "label": "linger.ms=0", "status": "completed", "passed": True, "thresholds": [latency]},
            {
                "point": 2,
                "label": "linger.ms=5",
                "status": "completed",
                "passed": False,
                "thresholds": [consumed, latency],
            },
            {"point": 3, "label": "linger.ms=50", "status": "failed", "passed": None, "thresholds": []},
        ],
    }
    write_junit(campaign_suites(verdict, "linger"), tmp_path / "campaign.xml")
    suites, xml = read(tmp_path / "campaign.xml")
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (4, 1, 1, 0)
    assert list(suites) == [
        "thresholds: linger, point 1 (linger.ms=0)",
        "thresholds: linger, point 2 (linger.ms=5)",
        "thresholds: linger, point 3 (linger.ms=50)",
    ]
    point2 = suites["thresholds: linger, point 2 (linger.ms=5)"]
    assert counts(point2) == (2, 1, 0, 0)
    assert {case.classname for case in point2} == {"dimster.thresholds.linger.point2"}
    [failure] = cases(point2)["consumed.rate >= 0.95 * produced.rate"].result
    assert failure.message == "consumed.rate = 333.1 msg/s (mean of 331, 335.2), not >= 380.19 msg/s"
    assert {p.name: p.value for p in point2.properties()} == {
        "campaign": "linger",
        "point": "2",
        "label": "linger.ms=5",
        "status": "completed",
    }
    point3 = suites["thresholds: linger, point 3 (linger.ms=50)"]
    assert counts(point3) == (1, 0, 1, 0)
    [error] = next(iter(point3)).result
    assert isinstance(error, Error) and "status failed" in error.message


FIGURE = {"tolerance": "10%", "test": "intervals", "samples": [8, 8], "reason": ""}


@pytest.mark.unit
def test_a_comparison_fails_a_worse_figure_skips_an_undecided_one_and_passes_the_rest(tmp_path):
    worse = FIGURE | {
        "figure": "e2e.p99",
        "unit": "ms",
        "baseline": 12.1,
        "candidate": 30.2,
        "change": 1.496,
        "p_worse": 0.003,
        "p_better": 0.998,
        "verdict": "worse",
        "reason": "30.2 ms is 149.6 % above 12.1 ms",
    }
    better = FIGURE | {
        "figure": "consumed.rate",
        "unit": "msg/s",
        "baseline": 380.0,
        "candidate": 400.0,
        "change": 0.0526,
        "p_worse": 0.99,
        "p_better": 0.01,
        "verdict": "better",
    }
    same = FIGURE | {
        "figure": "lost",
        "unit": "",
        "baseline": 0,
        "candidate": 0,
        "change": None,
        "test": "none",
        "p_worse": None,
        "p_better": None,
        "samples": [1, 1],
        "verdict": "same",
    }
    undecided = FIGURE | {
        "figure": "e2e.p50",
        "unit": "ms",
        "baseline": 4.0,
        "candidate": 4.4,
        "change": 0.1,
        "test": "repeats",
        "p_worse": None,
        "p_better": None,
        "samples": [1, 1],
        "verdict": "undecided",
        "reason": "too few repeats to decide (1 and 1; 3 each at least)",
    }
    result = {
        "baseline": "results/a",
        "candidate": "results/b",
        "alpha": 0.05,
        "regression": True,
        "notes": [],
        "points": [
            {"label": "point 1 (linger.ms=0)", "figures": [worse, better]},
            {"label": "point 2 (linger.ms=5)", "figures": [same, undecided]},
        ],
    }
    write_junit(comparison_suites(result), tmp_path / "compare.xml")
    suites, xml = read(tmp_path / "compare.xml")
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (4, 1, 0, 1)
    point1, point2 = suites["comparison: point 1 (linger.ms=0)"], suites["comparison: point 2 (linger.ms=5)"]
    assert counts(point1) == (2, 1, 0, 0) and counts(point2) == (2, 0, 0, 1)
    assert {p.name: p.value for p in point1.properties()} == {
        "baseline": "results/a",
        "candidate": "results/b",
        "alpha": "0.05",
    }
    assert {case.classname for case in point2} == {"dimster.compare.point2"}

    [failure] = cases(point1)["e2e.p99"].result
    assert isinstance(failure, Failure) and failure.type == "regression"
    assert failure.message == (
        "worse: baseline 12.1 ms, candidate 30.2 ms, change +149.6 %, p = 0.003 (intervals: 8 vs 8 samples), "
        "tolerance 10%"
    )
    assert cases(point1)["consumed.rate"].is_passed
    assert cases(point1)["consumed.rate"].system_out.startswith("better: baseline 380 msg/s, candidate 400 msg/s")
    assert "p = 0.01" in cases(point1)["consumed.rate"].system_out
    assert cases(point2)["lost"].system_out == "same: baseline 0, candidate 0, change unknown, tolerance 10%"
    [skipped] = cases(point2)["e2e.p50"].result
    assert isinstance(skipped, Skipped) and skipped.message == "too few repeats to decide (1 and 1; 3 each at least)"


@pytest.mark.unit
def test_names_and_messages_with_xml_characters_round_trip(tmp_path):
    name = 'e2e.p99 < 50ms & consumed.rate >= "0.95"'
    message = "a < b & c > d\nsecond line"
    suite = Suite("a <suite> & 'more'", [Case("dimster.x", name, "failed", message, "out <&>")], {"k&": "v<"})
    write_junit([suite], tmp_path / "j.xml")
    [(suite_name, read_suite)] = read(tmp_path / "j.xml")[0].items()
    assert suite_name == "a <suite> & 'more'"
    [case] = read_suite
    assert case.name == name and case.system_out == "out <&>"
    assert case.result[0].message == message
    assert {p.name: p.value for p in read_suite.properties()} == {"k&": "v<"}


@pytest.mark.unit
def test_the_file_is_written_whole_into_a_new_folder_and_replaces_an_old_one(tmp_path):
    path = tmp_path / "ci" / "reports" / "junit.xml"
    write_junit([run_suite(RUN_VERDICT, RUN_INFO)], path)
    write_junit([], path)  # the second write replaces the first
    assert [p.name for p in path.parent.iterdir()] == ["junit.xml"]  # no temporary file left
    suites, xml = read(path)
    assert suites == {} and (xml.tests, xml.failures, xml.errors, xml.skipped) == (0, 0, 0, 0)


@pytest.mark.unit
def test_a_path_that_cannot_be_written_is_one_error_line_naming_it(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    for path in (tmp_path / "a-file" / "junit.xml", tmp_path):  # under a file; a folder itself
        with pytest.raises(DimsterError) as raised:
            write_junit([run_suite(RUN_VERDICT, RUN_INFO)], path)
        assert str(path) in str(raised.value) and "\n" not in str(raised.value)
    assert sorted(p.name for p in tmp_path.parent.iterdir() if p.name.startswith(f".{tmp_path.name}")) == []


@pytest.mark.unit
def test_empty_verdicts_give_empty_suites(tmp_path):
    suite = run_suite({"passed": True, "aborted_by": None, "thresholds": []}, {})
    assert suite.name == "thresholds: run" and suite.cases == [] and suite.properties == {}
    assert suite.timestamp is None and suite.time is None
    assert run_suite(None, RUN_INFO).cases == []  # a workload without thresholds has a null verdict
    assert campaign_suites({"passed": True, "points": []}, "c") == [] and campaign_suites(None, "c") == []
    assert comparison_suites({"baseline": "a", "candidate": "b", "alpha": 0.05, "points": []}) == []
    write_junit([suite], tmp_path / "j.xml")
    suites, xml = read(tmp_path / "j.xml")
    assert counts(suites["thresholds: run"]) == (0, 0, 0, 0) and xml.tests == 0


@pytest.mark.unit
def test_values_are_shown_with_their_unit():
    shown = [quantity(v, u) for v, u in [(12.3, "ms"), (333.1, "msg/s"), (380.19, "msg/s"), (0, ""), (0.0042, "MB/s")]]
    assert shown == ["12.3 ms", "333.1 msg/s", "380.19 msg/s", "0", "0.0042 MB/s"]
    assert [quantity(1234567.0), quantity(2.5e-5, "ms")] == ["1,234,567", "2.5e-05 ms"]
    assert quantity(None, "ms") == "no value"
