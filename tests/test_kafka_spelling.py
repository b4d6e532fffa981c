"""Values that mirror a Kafka property take Kafka's own spelling, in either case (issue 39): the
workload's `acknowledgement.mode` as `share.acknowledgement.mode` spells it, a secure profile's
`protocol` as `security.protocol` does; the model holds them as dimster lists them, and the published
schemas list both."""

import json
from pathlib import Path

import pytest
import yaml

from dimster.cluster.tls import Security
from dimster.errors import DimsterError
from dimster.workload.model import Workload, parse_workload

pytestmark = pytest.mark.unit

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


@pytest.mark.parametrize("spelled", ["explicit", "Explicit", "EXPLICIT"])
def test_the_acknowledgement_mode_takes_kafka_s_spelling(spelled):
    w = Workload.model_validate({"name": "w", "acknowledgement": {"mode": spelled, "rejectFraction": 0.1}})
    assert w.acknowledgement.mode == "EXPLICIT" and w.acknowledgement.reject_fraction == 0.1


def test_a_mode_of_no_case_of_kafka_s_is_one_line_naming_what_was_written(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("name: w\nacknowledgement:\n  mode: sometimes\n")
    with pytest.raises(DimsterError) as refused:
        parse_workload(yaml.safe_load(path.read_text()), str(path))
    assert "sometimes" in str(refused.value) and "'IMPLICIT' or 'EXPLICIT'" in str(refused.value)
    assert len(str(refused.value).splitlines()) == 1


def test_a_secure_profile_s_protocol_takes_either_case():
    assert Security.model_validate({"protocol": "sasl_ssl", "passwordEnv": "P"}).protocol == "SASL_SSL"
    with pytest.raises(ValueError, match="plaintext"):
        Security.model_validate({"protocol": "plaintext", "passwordEnv": "P"})


def test_the_published_schemas_list_kafka_s_spelling_too():
    workload = json.loads((SCHEMAS / "workload.schema.json").read_text())
    assert workload["definitions"]["Acknowledgement"]["properties"]["mode"]["enum"] == [
        "IMPLICIT", "EXPLICIT", "implicit", "explicit"
    ]  # fmt: skip
    environment = json.loads((SCHEMAS / "environment.schema.json").read_text())
    assert environment["definitions"]["Security"]["properties"]["protocol"]["enum"] == ["SASL_SSL", "sasl_ssl"]
