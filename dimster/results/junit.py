"""JUnit XML for CI: a run's thresholds, a campaign's points and a comparison's figures as test cases,
so any CI system shows which held. Written with the standard library; the tests read it with a
JUnit reader of its own (junitparser)."""

import os
import re
import xml.etree.ElementTree as ET
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dimster.errors import DimsterError
from dimster.verdict.figures import FIGURES
from dimster.verdict.judge import quantity

OUTCOMES = ("passed", "failed", "error", "skipped")
_RESULT_TAGS = {"failed": "failure", "error": "error", "skipped": "skipped"}
_COMPARISON = re.compile(r"\s*(<=|>=|==|!=|<|>)\s*")
_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # characters XML 1.0 cannot hold


@dataclass
class Case:
    classname: str
    name: str
    outcome: str  # passed | failed | error | skipped
    message: str = ""
    output: str = ""  # the case's <system-out>


@dataclass
class Suite:
    name: str
    cases: list[Case]
    properties: dict[str, str] = field(default_factory=dict)
    timestamp: str | None = None  # ISO 8601, UTC
    time: float | None = None  # seconds


def write_junit(suites: list[Suite], path: Path) -> None:
    """Write the suites to `path` whole or not at all (a temporary file beside it, then renamed)."""
    root = ET.Element("testsuites", name="dimster")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for suite in suites:
        counts = _counts(suite.cases)
        totals = {key: totals[key] + counts[key] for key in totals}
        root.append(_suite_element(suite, counts))
    for key, count in totals.items():
        root.set(key, str(count))
    ET.indent(root)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
        os.replace(tmp, path)
    except OSError as e:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
        not_folder = isinstance(e, FileExistsError | NotADirectoryError)
        reason = "a part of its path is a file, not a folder" if not_folder else e.strerror or str(e)
        raise DimsterError(
            f"cannot write the JUnit file {path}: {reason} (give a file in a folder you can write)"
        ) from None


def run_suite(verdict: dict[str, Any] | None, run_info: dict[str, Any]) -> Suite:
    """A run's verdict (summary.json `verdict`, None without thresholds) as one suite, one case per
    threshold; `run_info` is its run.json."""
    verdict = verdict or {}
    workload, run_id = str(run_info.get("workload") or "run"), run_info.get("run_id")
    properties = {
        "run": run_id,
        "workload": run_info.get("workload"),
        "environment": run_info.get("environment"),
        "kafka": (run_info.get("versions") or {}).get("kafka"),
        "aborted_by": verdict.get("aborted_by"),
    }
    started = _epoch(run_info.get("started"))
    ended = run_info.get("ended")
    return Suite(
        name=f"thresholds: {workload} ({run_id})" if run_id else f"thresholds: {workload}",
        cases=[
            _threshold_case(f"dimster.thresholds.{workload}", result, verdict.get("aborted_by"))
            for result in verdict.get("thresholds") or []
        ],
        properties={key: str(value) for key, value in properties.items() if value is not None},
        timestamp=None if started is None else datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        time=round(ended - started, 3) if started is not None and isinstance(ended, int | float) else None,
    )


def campaign_suites(verdict: dict[str, Any] | None, campaign: str) -> list[Suite]:
    """A campaign's verdict as one suite per point, one case per threshold judged on the point's mean;
    a point whose runs did not complete is one error case."""
    suites = []
    for point in (verdict or {}).get("points") or []:
        number, label, status = point.get("point"), point.get("label"), point.get("status")
        classname = f"dimster.thresholds.{campaign}.point{number}"
        if status != "completed" or point.get("passed") is None:
            message = f"point {number} did not complete (status {status}): its thresholds were not judged"
            cases = [Case(classname, "the point's runs completed", "error", message)]
        else:
            cases = [_threshold_case(classname, result) for result in point.get("thresholds") or []]
        properties = {"campaign": campaign, "point": str(number), "label": str(label), "status": str(status)}
        suites.append(Suite(f"thresholds: {campaign}, point {number} ({label})", cases, properties))
    return suites


def comparison_suites(result: dict[str, Any]) -> list[Suite]:
    """A comparison's verdict as one suite per point, one case per compared figure: worse fails,
    undecided is skipped with its reason, better and same pass."""
    properties = {key: str(result.get(key)) for key in ("baseline", "candidate", "alpha")}
    suites = []
    for index, point in enumerate(result.get("points") or [], start=1):
        label = str(point.get("label"))
        number = re.match(r"point (\d+)", label)
        classname = "dimster.compare" if label == "run" else f"dimster.compare.point{number[1] if number else index}"
        cases = [_figure_case(classname, figure) for figure in point.get("figures") or []]
        suites.append(Suite(f"comparison: {label}", cases, dict(properties)))
    return suites


def _threshold_case(classname: str, result: dict[str, Any], aborted_by: str | None = None) -> Case:
    text, unit = str(result.get("threshold")), str(result.get("unit") or "")
    left, operator, _ = _COMPARISON.split(text, maxsplit=1) if _COMPARISON.search(text) else (text, "?", "")
    value, bound = result.get("value"), result.get("bound")
    shown = quantity(value, unit)
    if result.get("repeats"):
        shown += f" (mean of {', '.join(quantity(v) for v in result['repeats'])})"
    figures = [  # the figures its right side names
        f"{name} = {quantity(v, _unit(name))}" for name, v in (result.get("figures") or {}).items() if name != left
    ]
    output = "\n".join(figures)
    if value is None or bound is None:
        note = str(result.get("note") or f"{left} has no value")
        return Case(classname, text, "error", note if note.startswith("no value") else f"no value: {note}", output)
    judged = "\n".join([f"{left} = {shown}, {operator} {quantity(bound, unit)}", *figures])
    if result.get("passed"):
        return Case(classname, text, "passed", output=judged)
    if result.get("passed") is None:  # a latency or rate of a saturated load generator (verdict/judge.py)
        return Case(classname, text, "skipped", str(result.get("note") or "undecided"), judged)
    message = f"{left} = {shown}, not {operator} {quantity(bound, unit)}"
    if aborted_by == text:
        message += "; it stopped the run early (abortOnFail)"
    return Case(classname, text, "failed", message, output)


def _figure_case(classname: str, figure: dict[str, Any]) -> Case:
    name, unit, verdict = str(figure.get("figure")), str(figure.get("unit") or ""), figure.get("verdict")
    change = figure.get("change")
    line = (
        f"baseline {quantity(figure.get('baseline'), unit)}, candidate {quantity(figure.get('candidate'), unit)}, "
        + (f"change {change * 100:+.1f} %" if change is not None else "change unknown")
    )
    p = figure.get("p_better" if verdict == "better" else "p_worse")
    samples = figure.get("samples") or []
    if p is not None:
        line += f", p = {p:.3g} ({figure.get('test')}: {' vs '.join(map(str, samples))} samples)"
    if figure.get("tolerance"):
        line += f", tolerance {figure['tolerance']}"
    reason = str(figure.get("reason") or "")
    if verdict == "worse":
        return Case(classname, name, "failed", f"worse: {line}", reason)
    if verdict == "undecided":
        return Case(classname, name, "skipped", reason or "undecided", line)
    if verdict in ("better", "same"):
        return Case(classname, name, "passed", output="\n".join(filter(None, [f"{verdict}: {line}", reason])))
    return Case(classname, name, "error", f"unknown verdict {verdict!r} (valid: worse, better, same, undecided)")


def _unit(name: str) -> str:
    figure = FIGURES.get(name)
    return figure.unit if figure else ""


def _epoch(started: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(started)).timestamp()
    except ValueError:
        return None


def _counts(cases: list[Case]) -> dict[str, int]:
    def count(outcome: str) -> int:
        return sum(case.outcome == outcome for case in cases)

    return {"tests": len(cases), "failures": count("failed"), "errors": count("error"), "skipped": count("skipped")}


def _suite_element(suite: Suite, counts: dict[str, int]) -> ET.Element:
    element = ET.Element("testsuite", {"name": _xml(suite.name)} | {key: str(n) for key, n in counts.items()})
    if suite.timestamp:
        element.set("timestamp", suite.timestamp)
    if suite.time is not None:
        element.set("time", f"{suite.time:.3f}")
    if suite.properties:
        properties = ET.SubElement(element, "properties")
        for name, value in suite.properties.items():
            ET.SubElement(properties, "property", name=_xml(name), value=_xml(value))
    for case in suite.cases:
        if case.outcome not in OUTCOMES:
            raise ValueError(f"a JUnit case's outcome is one of {', '.join(OUTCOMES)}, not {case.outcome!r}")
        testcase = ET.SubElement(element, "testcase", classname=_xml(case.classname), name=_xml(case.name))
        if case.outcome in _RESULT_TAGS:
            tag = _RESULT_TAGS[case.outcome]
            result = ET.SubElement(testcase, tag, message=_xml(case.message))
            if tag == "error":
                result.set("type", "not judged")
            elif tag == "failure":
                result.set("type", "threshold" if case.classname.startswith("dimster.thresholds") else "regression")
        if case.output:
            ET.SubElement(testcase, "system-out").text = _xml(case.output)
    return element


def _xml(text: str) -> str:
    return _NOT_XML.sub("", text)
