"""run/grafana/dimster.json asks only for series that exist: the run's endpoint (status_schema.py,
client_series.py), the brokers' JMX exporter rules (kafka/jmx-exporter.yaml) or the agent's JVM
metrics. A renamed metric shows here, not as an empty panel."""

import json
import re

import pytest
import yaml

from dimster.coordinator.control import client_series, status_schema
from tests.conftest import REPO

DASHBOARD = REPO / "run" / "grafana" / "dimster.json"
RULES = REPO / "dimster" / "kafka" / "jmx-exporter.yaml"
JVM = {
    "jvm_memory_used_bytes",
    "jvm_memory_max_bytes",
    "jvm_gc_collection_seconds_sum",
    "jvm_gc_collection_seconds_count",
    "jvm_threads_current",
}


def panels() -> list[dict]:
    return json.loads(DASHBOARD.read_text())["panels"]


def metric_names() -> set[str]:
    """The metric names the panels' queries use, histogram suffixes taken off (JVM names kept whole)."""
    exprs = [t["expr"] for p in panels() for t in p.get("targets", [])]
    names = {m for expr in exprs for m in re.findall(r"\b(?:dimster|kafka|jvm)_[a-z0-9_]+", expr)}
    return {n if n.startswith("jvm_") else re.sub(r"_(bucket|sum|count)$", "", n) for n in names}


def dimster_exported() -> set[str]:
    s = client_series
    return (
        {f.metric for f in status_schema.FIELDS}
        | {name for name, _ in s.LATENCIES.values()}
        | {name + "_total" for name, *_ in s.COUNTERS.values()}
        | {name + "_total" for name, _ in s.STATS_COUNTERS.values()}
        | {name for name, _ in s.STATS_GAUGES.values()}
        | {name for name, *_ in s.GAUGES.values()}
    )


def rule_patterns() -> list[re.Pattern]:
    """Each rule's output name as a regex: `$N` is the Nth group of its pattern when that is a list of
    words (`(BytesIn|BytesOut)`), else any name part (the agent turns `-` into `_`); names lowercase."""
    rules = yaml.safe_load(RULES.read_text())
    assert rules["lowercaseOutputName"] is True
    patterns = []
    for rule in rules["rules"]:
        groups = re.findall(r"\((?!\?)([^()]*)\)", rule["pattern"])

        def group(m, groups=groups):
            text = groups[int(m.group(1)) - 1]
            return f"(?:{text.lower()})" if re.fullmatch(r"\w+(\|\w+)*", text) else "[a-z0-9_]+"

        patterns.append(re.compile(re.sub(r"\$(\d+)", group, rule["name"].lower())))
    return patterns


@pytest.mark.unit
def test_panels_have_unique_ids_titles_and_queries():
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids))
    assert all(p.get("title") for p in panels())
    for p in panels():
        if p["type"] != "row":
            assert any(t.get("expr") for t in p.get("targets", [])), p["title"]


@pytest.mark.unit
def test_every_metric_is_one_dimster_or_the_brokers_export():
    names = metric_names()
    assert {n for n in names if n.startswith("dimster_")} - dimster_exported() == set()
    patterns = rule_patterns()
    kafka = {n for n in names if n.startswith("kafka_")}
    assert {n for n in kafka if not any(p.fullmatch(n) for p in patterns)} == set()
    assert {n for n in names if n.startswith("jvm_")} - JVM == set()
    assert len(kafka) > 10 and "dimster_e2e_latency_seconds" in names


@pytest.mark.unit
def test_the_rules_name_series_as_promtool_wants_them():
    """What `promtool check metrics` would refuse, caught in the rules (the monitor test lints a real
    broker's scrape): no `quantile` label outside a summary, no `_count` name outside a histogram or a
    summary, no abbreviated unit (`_ms`); counters end in `_total`, and Kafka's ms become seconds."""
    for rule in yaml.safe_load(RULES.read_text())["rules"]:
        name, labels = rule["name"], rule.get("labels", {})
        assert "quantile" not in labels and not name.endswith("_count"), name
        assert not re.search(r"_(ms|us|ns|sec|secs|msec)(_|$)|ms$", name), name
        assert (rule["type"] == "COUNTER") == name.endswith("_total"), name
        in_ms = re.search(r"Ms\b|-ms-|load-time|latency", rule["pattern"])
        if in_ms and not rule["pattern"].endswith("><>Count"):  # a histogram's Count counts, in no unit
            assert name.endswith("_seconds") and rule["valueFactor"] == 0.001, name
