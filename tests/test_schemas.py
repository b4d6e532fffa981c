"""The published JSON Schemas (schemas/): generated from the models and up to date, draft-07 only,
taking every shipped workload, environment and campaign (short forms too) and the files a run and a
campaign write, and refusing what the models refuse key by key."""

import json
import re
import typing
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft7Validator
from pydantic import BaseModel

from dimster import schemas
from dimster.campaign.model import CampaignFile, parse_campaign
from dimster.campaign.runner import CampaignFolder
from dimster.cluster.backends import profile_models
from dimster.errors import DimsterError
from dimster.results.records import RunJson, SummaryJson, Totals
from dimster.verdict.judge import judge_summary
from dimster.workload.model import Workload, parse_workload
from dimster.workload.thresholds import Threshold
from tests.conftest import REPO
from tests.fake_run import FakeWorkers, coordinator
from tests.report_runs import Scenario, write_run

pytestmark = pytest.mark.unit

SCHEMAS = schemas.schemas()
MODELINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")
SHIPPED = {
    "workload": sorted((REPO / "run" / "workloads").rglob("*.yaml")),
    "environment": sorted((REPO / "run" / "environments").glob("*.yaml")),
    "campaign": sorted((REPO / "run" / "campaigns").glob("*.yaml")),
}
LATER_DRAFTS = {"$defs", "prefixItems", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$dynamicAnchor",
                "$recursiveRef", "$recursiveAnchor", "$anchor", "dependentRequired", "dependentSchemas",
                "minContains", "maxContains", "$vocabulary", "discriminator"}  # fmt: skip


def validator(name: str) -> Draft7Validator:
    return Draft7Validator(SCHEMAS[f"{name}.schema.json"])


def problems(name: str, document) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(name).iter_errors(document)]


def test_the_schemas_in_the_repo_are_the_generated_ones():
    stale = schemas.stale(REPO / "schemas")
    assert not stale, f"schemas/ is stale ({', '.join(stale)}): run python -m dimster.schemas"


def test_check_names_a_changed_missing_or_extra_schema_file_and_fails(tmp_path, monkeypatch, capsys):
    assert schemas.write(tmp_path) == list(SCHEMAS) and schemas.stale(tmp_path) == []
    (tmp_path / "run.schema.json").write_text("{}\n")
    (tmp_path / "summary.schema.json").unlink()
    (tmp_path / "old.schema.json").write_text("{}\n")
    assert schemas.stale(tmp_path) == ["old.schema.json", "run.schema.json", "summary.schema.json"]
    monkeypatch.setattr(schemas, "SCHEMAS_DIR", tmp_path)
    assert schemas.main(["--check"]) == 1
    assert "run.schema.json" in capsys.readouterr().err
    assert schemas.main([]) == 0 and schemas.main(["--check"]) == 0
    assert not (tmp_path / "old.schema.json").exists()


def keys_anywhere(schema) -> set[str]:
    if isinstance(schema, dict):
        return set(schema) | set().union(*map(keys_anywhere, schema.values()))
    if isinstance(schema, list):
        return set().union(*map(keys_anywhere, schema))
    return set()


def refs(schema) -> list[str]:
    if isinstance(schema, dict):
        return ([schema["$ref"]] if "$ref" in schema else []) + [r for v in schema.values() for r in refs(v)]
    return [r for v in schema for r in refs(v)] if isinstance(schema, list) else []


@pytest.mark.parametrize("name", SCHEMAS)
def test_every_schema_is_draft_07_and_its_references_resolve(name):
    schema = SCHEMAS[name]
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    Draft7Validator.check_schema(schema)
    assert not keys_anywhere(schema) & LATER_DRAFTS
    for ref in refs(schema):
        assert ref.startswith("#/definitions/") and ref.removeprefix("#/definitions/") in schema["definitions"], ref


SHIPPED_FILES = [pytest.param(kind, path, id=str(path.relative_to(REPO))) for kind, paths in SHIPPED.items()
                 for path in paths]  # fmt: skip


def test_every_kind_of_shipped_file_is_there():
    assert all(len(paths) >= 5 for paths in SHIPPED.values())


@pytest.mark.parametrize(("kind", "path"), SHIPPED_FILES)
def test_every_shipped_file_names_its_schema_and_validates(kind, path: Path):
    first = path.read_text().splitlines()[0]
    match = MODELINE.match(first)
    assert match, f"{path.name}: its first line is not `# yaml-language-server: $schema=...`"
    assert (path.parent / match[1]).resolve() == REPO / "schemas" / f"{kind}.schema.json"
    assert problems(kind, yaml.safe_load(path.read_text())) == []


@pytest.mark.parametrize("path", sorted((REPO / "tests" / "workloads" / "good").glob("*.yaml")), ids=lambda p: p.stem)
def test_the_test_suites_good_workloads_validate(path):
    assert problems("workload", yaml.safe_load(path.read_text())) == []


# bad workloads whose one key is wrong (the rules between keys are the model's: `dimster validate`)
ONE_KEY_WRONG = ["bad_consumer_type", "bad_message_distributor", "bad_name", "bad_schedule_type",
                 "compressible_ratio_over_one", "group_config_not_scalar", "kafka_property_not_scalar",
                 "message_size_below_header", "missing_name", "negative_rate", "schedule_no_segments",
                 "section_not_a_mapping", "segment_zero_duration", "top_level_list", "unknown_kafka_config_section",
                 "unknown_nested_key", "unknown_top_level_key_typo", "wrong_type"]  # fmt: skip


@pytest.mark.parametrize("stem", ONE_KEY_WRONG)
def test_a_workload_with_one_wrong_key_is_refused(stem):
    assert problems("workload", yaml.safe_load((REPO / "tests" / "workloads" / "bad" / f"{stem}.yaml").read_text()))


def test_an_unknown_key_is_refused_at_the_top_and_below():
    assert problems("workload", {"name": "w", "producerRat": 5}) == [
        ": Additional properties are not allowed ('producerRat' was unexpected)"
    ]
    assert problems("workload", {"name": "w", "payload": {"typ": "RANDOM"}})
    assert problems("campaign", {"name": "c", "base": {"producerRat": 5}})


# the short form, a wrong one, and the file it is in
SHORT_FORMS = [
    ("mode", "correctness", "thorough", "workload"),
    ("clientLibrary", "java", "jvm", "workload"),
    ("clientVersion", "4.3.0", "4.3", "workload"),
    ("mode", "correctness", "explore-limits", "campaign"),  # explore-limits needs targetE2eP99Ms
    ("thresholds", ["e2e.p99 < 50ms", {"threshold": "duplicates == 0", "abortOnFail": True}], [50], "workload"),
]


def model_takes(kind: str, document: dict) -> bool:
    try:
        if kind == "workload":
            parse_workload(document, "w.yaml")
        else:
            parse_campaign(document, "c.yaml", REPO / "c.yaml")
    except DimsterError:
        return False
    return True


@pytest.mark.parametrize(("key", "short", "wrong", "kind"), SHORT_FORMS)
def test_a_short_form_the_model_takes_the_schema_takes_and_a_wrong_one_neither(key, short, wrong, kind):
    base = {"name": "w", "clientLibrary": "java"} if kind == "workload" else {"name": "c", "base": {}}
    for value, taken in ((short, True), (wrong, False)):
        document = {**base, key: value}
        assert (model_takes(kind, document), not problems(kind, document)) == (taken, taken), value


def models_under(model: type[BaseModel], seen: set) -> set:
    """`model` and every model its fields hold, at any depth."""
    if model not in seen:
        seen.add(model)
        for field in model.model_fields.values():
            for found in types_in(field.annotation):
                models_under(found, seen)
    return seen


def types_in(annotation) -> list[type[BaseModel]]:
    found = [annotation] if isinstance(annotation, type) and issubclass(annotation, BaseModel) else []
    return found + [t for arg in typing.get_args(annotation) for t in types_in(arg)]


# before-validators that only refuse (none takes a form the fields do not say) and those that take a short form
NARROWING = {
    "Workload._finite", "Dimension._values_listed", "ProfileBase._no_inline_token",
    "ProfileBase._keys_of_other_backends", "ProfileBase._docker_workers", "Security._no_inline_password",
}  # fmt: skip
WIDENING = {
    "Workload._mode_name": (Workload, "mode"),
    "Workload._same_for_every_role": (Workload, "clientLibrary"),
    "Workload._one_version_for_all": (Workload, "clientVersion"),
    "CampaignFile._mode_name": (CampaignFile, "mode"),
    "Threshold._short_form": (Threshold, None),
}


def test_every_before_validator_of_the_models_is_known_and_each_short_form_is_in_the_schemas():
    models: set = set()
    for root in (Workload, CampaignFile, *profile_models().values()):
        models_under(root, models)
    before = set()
    for model in models:
        decorators = model.__pydantic_decorators__
        for d in [*decorators.field_validators.values(), *decorators.model_validators.values()]:
            if d.info.mode == "before":
                before.add(d.func.__qualname__)
    assert before == NARROWING | set(WIDENING), "a new mode='before' validator: does its key need a short form?"
    assert set(WIDENING.values()) == set(schemas.SHORT_FORMS)


def test_an_environment_is_judged_by_the_model_of_the_backend_it_names():
    assert problems("environment", {"nodes": 3, "heap": "2g"}) == []  # no backend: local
    assert problems("environment", {"image": "apache/kafka:4.3.1"})  # a docker key on a local profile
    assert problems("environment", {"backend": "docker", "image": "apache/kafka:4.3.1"}) == []
    assert problems("environment", {"backend": "external", "bootstrapServers": "h:9092"}) == []
    assert problems("environment", {"backend": "external", "bootstrapServers": "h:9092", "nodes": 3})
    assert problems("environment", {"backend": "cloud"})
    assert problems("environment", {"name": "local"})  # a profile is named by its file


def test_a_campaigns_base_is_a_file_or_a_workload_without_a_name():
    assert problems("campaign", {"name": "c", "base": "../workloads/quickstart.yaml"}) == []
    assert problems("campaign", {"name": "c", "base": {"producerRate": 5, "mode": "correctness"}}) == []
    assert problems("campaign", {"name": "c", "base": {"producerRate": -5}})
    assert problems("campaign", {"name": "c", "base": 7})


def test_the_run_json_of_a_run_validates_and_declares_every_key(tmp_path):
    c = coordinator(tmp_path, FakeWorkers())
    assert c.run() == 0
    info = json.loads((c.bundle.path / "run.json").read_text())
    assert problems("run", info) == []
    assert set(info) <= set(RunJson.__annotations__)
    assert set(info["totals"]) <= set(Totals.__annotations__)
    assert problems("run", {**info, "status": "finished"}) and problems("run", {**info, "totals": {"sent": 1}})
    assert (info["status"], info["e2e_ms"]["count"]) == ("completed", c.aggregate.e2e_measured.total)  # the end's


def run_json_writes(source: str) -> list[int]:
    """Lines of `source` that write to a path made from "run.json" (or "run.json.tmp"): a write,
    rename or replace called on it, or open() of it for writing; its path directly or through a name
    bound to it."""
    import ast

    tree = ast.parse(source)
    named = lambda node: "run.json" in ast.unparse(node)  # noqa: E731
    paths = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and named(n.value)
             for t in n.targets if isinstance(t, ast.Name)}  # fmt: skip
    is_path = lambda node: named(node) or (isinstance(node, ast.Name) and node.id in paths)  # noqa: E731
    found = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        writes = {"write_text", "write_bytes", "rename", "replace", "touch"}
        if (
            isinstance(f, ast.Attribute)
            and f.attr in writes
            and is_path(f.value)
            and not isinstance(f.value, ast.Constant)
        ):
            found.append(n.lineno)
        elif isinstance(f, ast.Name) and f.id == "open" and n.args and is_path(n.args[0]):
            mode = n.args[1] if len(n.args) > 1 else next((k.value for k in n.keywords if k.arg == "mode"), None)
            if isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+"):
                found.append(n.lineno)
    return found


def test_run_json_has_one_writer():
    """run.json is written by records.write_run_json alone (the run's record, typed as RunJson,
    through ResultsBundle.save_run_info; a crash's mark, its recovery from the journal, Spark's
    warm-up); the check finds the ways this code wrote it before (a path bound to a name, then written)."""
    from tests.cli import REPO

    before = 'path = run_dir / "run.json"\ntmp = path.with_name("run.json.tmp")\ntmp.write_text(t)\ntmp.replace(path)\n'
    assert run_json_writes(before) == [3, 4] and run_json_writes('(d / "run.json").write_text(t)') == [1]
    assert run_json_writes('with open(d / "run.json", "w") as f: pass') == [1]
    assert run_json_writes('info = json.loads((d / "run.json").read_text())') == []
    writers = sorted(
        str(path.relative_to(REPO)) for path in (REPO / "dimster").rglob("*.py") if run_json_writes(path.read_text())
    )
    assert writers == ["dimster/results/records.py"]


THRESHOLD = {"threshold": "consumed.rate >= 0.95 * produced.rate", "figures": {"consumed.rate": 333.1,
             "produced.rate": 400.2}, "value": 333.1, "bound": 380.19, "unit": "msg/s", "passed": False,
             "abortOnFail": False, "note": None}  # fmt: skip
VERDICT = {"passed": False, "aborted_by": None, "thresholds": [THRESHOLD]}


def test_a_summary_json_validates_with_or_without_a_verdict(tmp_path):
    summary = json.loads((write_run(tmp_path, Scenario()) / "summary" / "summary.json").read_text())
    assert problems("summary", summary) == []
    assert set(summary) <= set(SummaryJson.__annotations__)
    lag = {"broker_lag_total": {"max": 1200, "end": 0, "readings": 9}, "backlog": {"max": 800, "end": 0}}
    assert problems("summary", {**summary, **lag, "verdict": VERDICT}) == []
    judged = judge_summary(["consumed.rate >= 0.95 * produced.rate", {"threshold": "e2e.p99 < 5ms"}], summary)
    assert judged and problems("summary", {**summary, "verdict": judged}) == []
    assert problems("summary", {**summary, "verdict": None, "broker_lag_total": None, "backlog": None}) == []
    assert problems("summary", {**summary, "verdict": {**VERDICT, "passed": "no"}})
    assert problems("summary", {**summary, "latency_ms": {"e2e": {"p50": 1.0}}})


def test_a_campaigns_campaign_json_and_summary_validate(tmp_path):
    document = {"name": "grid", "base": {"consumersPerGroup": 1},
                "dimensions": [{"key": "producerRate", "values": [200, 400]}], "repeat": 2}  # fmt: skip
    campaign = parse_campaign(document, "grid.yaml", tmp_path / "grid.yaml")
    folder = CampaignFolder.create(tmp_path, campaign, "local")
    state = json.loads((folder.path / "campaign.json").read_text())
    assert len(state["points"]) == 4 and problems("campaign-result", state) == []
    assert problems("campaign-result", {**state, "points": [{"index": 1}]})
    point = {"point": 1, "label": "producerRate=200", "status": "completed", "passed": False,
             "thresholds": [{**THRESHOLD, "repeats": [331.0, 335.2]}]}  # fmt: skip
    summary = {"campaign": "grid", "dimensions": ["producerRate"], "metrics": ["e2e_p99_ms"], "notes": [],
               "points": [{"point": 1, "label": "producerRate=200", "values": {"producerRate": 200},
                           "status": "completed", "repeats": 2, "runs": [{"repeat": 1, "status": "completed",
                           "bundle": "b1"}], "metrics": {"e2e_p99_ms": {"mean": 3.0, "min": 2.0, "max": 4.0,
                           "stddev": 1.4}}}],
               "verdict": {"passed": False, "points": [point]}}  # fmt: skip
    assert problems("campaign-summary", summary) == []
    not_run = {**point, "status": "failed", "passed": None, "thresholds": []}
    assert problems("campaign-summary", {**summary, "verdict": {"passed": False, "points": [not_run]}}) == []
    assert problems("campaign-summary", {**summary, "verdict": {"passed": False, "points": [{"point": 1}]}})
