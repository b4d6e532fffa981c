"""The one redaction rule: secret-looking keys in mappings, change records, `k=v` text and command
lines, and the secret values a Redactor has seen, wherever they show up again."""

import json

import pytest

from dimster.results.bundle import ResultsBundle, load_timeline
from dimster.results.redaction import MASK, Redactor, is_secret_key, redact, redact_argv, redact_text

pytestmark = pytest.mark.unit

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="pw-9f3a";'


@pytest.mark.parametrize(
    "key",
    [
        "sasl.jaas.config",
        "kafkaConfig.commonConfig.sasl.jaas.config",
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.key.pem",
        "ssl.keystore.key",
        "sasl.oauthbearer.client.credentials.client.secret",
        "basic.auth.user.info.token",
        "PRIVATE_KEY",
    ],
)
def test_secret_keys(key):
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key", ["key", "kafkaConfig.producerConfig.key.serializer", "linger.ms", "producerRate", "sasl.mechanism", 3, None]
)
def test_ordinary_keys(key):
    assert not is_secret_key(key)


def test_mappings_are_masked_at_any_depth():
    config = {"sasl.jaas.config": "x", "ssl.key.password": "y", "nested": {"sasl.password": "z"}, "acks": "all"}
    assert redact(config) == {
        "sasl.jaas.config": MASK,
        "ssl.key.password": MASK,
        "nested": {"sasl.password": MASK},
        "acks": "all",
    }


def test_change_records_naming_a_secret_key_mask_old_and_new():
    record = {"key": "kafkaConfig.commonConfig.sasl.jaas.config", "old": "a-secret", "new": JAAS, "effect": "x"}
    assert redact(record) == {**record, "old": MASK, "new": MASK}
    ordinary = {"key": "producerRate", "old": 1000, "new": 2000}
    assert redact(ordinary) == ordinary


def test_key_value_text_is_masked():
    assert redact_text("set kafkaConfig.commonConfig.sasl.password=hunter22 now") == (
        f"set kafkaConfig.commonConfig.sasl.password={MASK} now"
    )
    assert redact_text("--set=sasl.password=hunter22") == f"--set=sasl.password={MASK}"
    assert redact_text("linger.ms=5 acks=all") == "linger.ms=5 acks=all"


def test_command_lines_mask_every_form_of_set():
    argv = [
        "dimster",
        "run",
        "local",
        "-w",
        "secret-workload.yaml",
        "--set",
        "kafkaConfig.commonConfig.sasl.password=hunter22",
        "producerRate=10",
        "kafkaConfig.commonConfig.sasl.jaas.config",
        JAAS,
        "-s",
        f"kafkaConfig.commonConfig.sasl.jaas.config={JAAS}",
        "--no-summary",
    ]
    assert redact_argv(argv) == [
        "dimster",
        "run",
        "local",
        "-w",
        "secret-workload.yaml",
        "--set",
        f"kafkaConfig.commonConfig.sasl.password={MASK}",
        "producerRate=10",
        "kafkaConfig.commonConfig.sasl.jaas.config",
        MASK,
        "-s",
        f"kafkaConfig.commonConfig.sasl.jaas.config={MASK}",
        "--no-summary",
    ]


def test_a_secret_seen_once_is_masked_in_any_text():
    redactor = Redactor()
    redactor.redact({"kafkaConfig": {"commonConfig": {"sasl.jaas.config": JAAS}}})
    redactor.redact({"key": "kafkaConfig.commonConfig.sasl.password", "old": None, "new": "live-0c1d"})
    line = f"-- set kafkaConfig.commonConfig.sasl.jaas.config: {JAAS} -> live-0c1d (all-clients)"
    assert redactor.text(line) == f"-- set kafkaConfig.commonConfig.sasl.jaas.config: {MASK} -> {MASK} (all-clients)"
    assert redactor.redact({"reason": f"client failed: bad {JAAS}"}) == {"reason": f"client failed: bad {MASK}"}
    assert redactor.argv(["run", JAAS]) == ["run", MASK]


def test_short_values_are_masked_under_their_key_only():
    redactor = Redactor()
    assert redactor.redact({"sasl.password": "abc"}) == {"sasl.password": MASK}
    assert redactor.text("abc def") == "abc def"


def test_change_lines_naming_a_secret_key_are_masked_whatever_the_values():
    line = "-- set kafkaConfig.commonConfig.sasl.password: ab -> cd (all-clients)"
    assert redact_text(line) == f"-- set kafkaConfig.commonConfig.sasl.password: {MASK} -> {MASK} (all-clients)"
    ordinary = "12:00:00.000 producerRate: 300 -> 900 (rate)"
    assert redact_text(ordinary) == ordinary


def test_files_written_by_others_are_scrubbed(tmp_path):
    redactor = Redactor()
    redactor.learn({"sasl.password": "hunter22"})
    log = tmp_path / "worker-0.log"
    log.write_text("connecting with hunter22\n")
    redactor.scrub_file(log)
    assert log.read_text() == f"connecting with {MASK}\n"


def test_bundle_keeps_secrets_out_of_every_file(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["dimster", "run", "local", "--set", "ssl.key.password", "start-5e6f"])
    workload = {"name": "w", "kafkaConfig": {"commonConfig": {"sasl.jaas.config": JAAS, "acks": "all"}}}
    bundle = ResultsBundle(tmp_path, "w")
    bundle.start(workload=workload, environment={"name": "local"}, broker_config={}, kafka_version="4.3.1", run_id="r")
    bundle.modification(key="kafkaConfig.commonConfig.sasl.password", old=None, new="live-0c1d", effect="all-clients")
    printed = bundle.console("-- set kafkaConfig.commonConfig.sasl.password: None -> live-0c1d (all-clients)")
    bundle.event("run_failed", reason=f"client says {JAAS}")
    bundle.run_info["final_workload"] = workload
    bundle.save_run_info()
    (bundle.path / "logs" / "worker-0.log").write_text("using live-0c1d\n")
    bundle.scrub_logs()

    assert "live-0c1d" not in printed
    for path in bundle.path.rglob("*"):
        if path.is_file():
            text = path.read_text()
            for secret in (JAAS, "pw-9f3a", "live-0c1d", "start-5e6f"):
                assert secret not in text, (path.name, secret)
    run = json.loads((bundle.path / "run.json").read_text())
    assert run["final_workload"]["kafkaConfig"]["commonConfig"] == {"sasl.jaas.config": MASK, "acks": "all"}
    [change] = load_timeline(bundle.path)["modifications"]
    assert (change["old"], change["new"]) == (MASK, MASK)


def test_names_dimster_made_are_not_secret_keys():
    """A workload called "secrets" names its groups and topics so: run.json keeps them readable."""
    redactor = Redactor()
    redactor.add_names(["secrets-1a2b-t0-g0", "secrets-1a2b-0"])
    info = {"groups": {"secrets-1a2b-t0-g0": "secrets-1a2b-0"}, "account": {"secrets-1a2b-t0-g0": {"lost": 0}}}
    assert redactor.redact(info) == info
    assert redactor.redact({"secret.key": "hunter22"}) == {"secret.key": "***"}


def test_rows_of_one_shape_are_masked_by_what_each_holds_and_by_the_names_known_now():
    """A status's rows share their keys: a change record of a secret key masks its values, one of a
    plain key does not, whichever came first; a name made known later is no secret key from then on."""
    redactor = Redactor()
    changes = [{"key": "acks", "old": "1", "new": "all"}, {"key": "sasl.password", "old": "abcd1", "new": "efgh2"}]
    assert redactor.redact(changes) == [changes[0], {"key": "sasl.password", "old": MASK, "new": MASK}]
    assert redactor.redact([{"lag": 3, "w-token-g0": 5}] * 2) == [{"lag": 3, "w-token-g0": MASK}] * 2
    redactor.add_names(["w-token-g0"])
    assert redactor.redact([{"lag": 3, "w-token-g0": 5}]) == [{"lag": 3, "w-token-g0": 5}]
    assert redactor.text("old abcd1 new efgh2") == f"old {MASK} new {MASK}"


def test_a_tag_dimster_made_stays_and_is_no_secret_to_look_for():
    """`***2` (a secret's second value, as a campaign shows it) stays as it is wherever it shows, so
    the points of a campaign stay apart; a secret number is masked like a word."""
    redactor = Redactor()
    point = {"values": {"sasl.password": "***2", "ssl.key.password": 90817263}}
    assert redactor.redact(point) == {"values": {"sasl.password": "***2", "ssl.key.password": MASK}}
    assert redactor.text("== point 2: sasl.password=***2, linger.ms=5 at 90817263") == (
        f"== point 2: sasl.password=***2, linger.ms=5 at {MASK}"
    )
    assert redactor.secrets == {"90817263"}
    assert redact_text("sasl.password=***2x ssl.key.password=***2,x") == f"sasl.password={MASK} ssl.key.password={MASK}"
    assert redact({"key": "sasl.password", "old": "***1", "new": "hunter22"}) == {
        "key": "sasl.password",
        "old": "***1",
        "new": MASK,
    }


def test_a_status_published_again_masks_a_secret_learned_after_its_texts_were_first_masked():
    """A run's status goes through one Redactor every 0.25 s, which remembers the texts it masked; a
    secret it learns later is masked in those texts too, and lists of plain values stay as they are."""
    redactor = Redactor()
    status = {"workers": [{"host": "h1", "note": "connected with hunter22-long"}], "rates": [1.5, 2, None, True]}
    assert redactor.redact(status) == status  # nothing known yet: the texts are as they were
    redactor.learn({"kafkaConfig": {"sasl.password": "hunter22-long"}})
    again = redactor.redact(status)
    assert again["workers"] == [{"host": "h1", "note": f"connected with {MASK}"}]
    assert again["rates"] == [1.5, 2, None, True]
    assert redactor.redact([("nested", {"ssl.key.password": "x" * 8})]) == [["nested", {"ssl.key.password": MASK}]]
    assert redactor.text(f"x {'x' * 8} y") == f"x {MASK} y"  # learned under its key while walking


@pytest.mark.parametrize("debug", ["", "1"])
def test_an_internal_errors_line_and_its_traceback_are_masked(monkeypatch, capsys, debug):
    """A bug whose exception carries a secret (here planted in its message) says so in one line, or
    with DIMSTER_DEBUG in a traceback, with the secret masked either way."""
    from dimster.cli import app as cli

    def broken(**_):
        raise RuntimeError(f"could not build the client from sasl.jaas.config={JAAS} ssl.key.password=pw-77c1")

    monkeypatch.setattr(cli, "app", broken)
    monkeypatch.setenv("DIMSTER_DEBUG", debug)
    with pytest.raises(SystemExit) as exited:
        cli.main()
    err = capsys.readouterr().err
    assert exited.value.code == 1 and "RuntimeError: could not build the client" in err
    assert "pw-9f3a" not in err and "pw-77c1" not in err and err.count(MASK) >= 2, err
    assert ("Traceback (most recent call last)" in err) == bool(debug)
