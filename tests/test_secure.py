"""`localSecure`: SASL_SSL listeners, a SCRAM user and a CA made at `cluster up`, clients of both
libraries configured from the profile. The profile names the password's source and never holds it;
neither server.properties nor a results bundle does; a wrong password is one error line at once.

The broker tests run the session's scratch copy of `localSecure` (its own ports, the session's state
folder), brought up once for the module, with a password made for the session."""

import contextlib
import json
import secrets
from pathlib import Path

import psutil
import pytest

from dimster.clients import library
from dimster.cluster.local import LocalCluster
from dimster.cluster.tls import make_tls_material, refuses_password
from dimster.environment import load_environment
from dimster.errors import DimsterError
from dimster.kafka.admin import registered_brokers
from dimster.kafka.distribution import KafkaDistribution
from dimster.kafka.security import java_security
from dimster.results.redaction import Redactor
from dimster.worker.clients import client_properties
from dimster.worker.protocol import Assign, Assignment, decode, encode
from dimster.workload.model import Workload
from tests.agents import running_agent, write_token
from tests.conftest import copy_project, dimster, files_holding, spare_ports, write_environment
from tests.runs import BASE, only_bundle, run_info, summarized, write_workload

ENV = "localSecure"
PASSWORD = f"dimster-pw-{secrets.token_hex(8)}"
SECURE = "security:\n  user: loadtest\n  passwordEnv: DIMSTER_TEST_PASSWORD\n"
SECURITY = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "SCRAM-SHA-512",
    "sasl.username": "loadtest",
    "sasl.password": 'p"w\\d',
    "ssl.ca.pem": "-----BEGIN CERTIFICATE-----\nMII...\n-----END CERTIFICATE-----\n",
}


def error_of(project: Path, name: str, text: str, monkeypatch) -> str:
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))
    write_environment(project, name, text)
    with pytest.raises(DimsterError) as error:
        LocalCluster(load_environment(name)).client_security()
    return str(error.value)


# ---- the profile ----------------------------------------------------------------------------------
@pytest.mark.unit
def test_an_inline_password_is_refused_with_one_line(project, monkeypatch):
    text = "security:\n  user: loadtest\n  password: hunter2hunter2\n"
    line = error_of(project, "inline", text, monkeypatch)
    assert "a password is never written in a profile" in line and "passwordEnv" in line and "passwordFile" in line
    assert "hunter2hunter2" not in line and "\n" not in line


@pytest.mark.unit
def test_the_password_source_is_one_of_env_and_file(project, monkeypatch):
    for name, security in (("none", "  user: u\n"), ("both", "  passwordEnv: X\n  passwordFile: f\n")):
        line = error_of(project, name, f"security:\n{security}", monkeypatch)
        assert "passwordEnv: NAME or passwordFile: FILE" in line


@pytest.mark.unit
def test_a_missing_variable_or_file_says_how_to_give_it(project, monkeypatch):
    monkeypatch.delenv("DIMSTER_TEST_PASSWORD", raising=False)
    line = error_of(project, "noenv", SECURE, monkeypatch)
    assert "'noenv' needs the password of SCRAM user loadtest" in line and "DIMSTER_TEST_PASSWORD" in line
    line = error_of(project, "nofile", "security:\n  passwordFile: secrets/kafka.txt\n", monkeypatch)
    assert "secrets/kafka.txt" in line and "unreadable" in line


@pytest.mark.unit
def test_the_password_comes_from_the_file_relative_to_the_project(project, monkeypatch):
    (project / "kafka-password").write_text("from-a-file\n")
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))
    write_environment(project, "filed", "security:\n  passwordFile: kafka-password\n")
    assert load_environment("filed").security.password("filed") == "from-a-file"


@pytest.mark.unit
def test_security_is_a_key_of_local_profiles_only(project, monkeypatch):
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))
    write_environment(project, "ext", "backend: external\nbootstrapServers: h:9092\n" + SECURE)
    with pytest.raises(DimsterError, match="security: only for backend: local"):
        load_environment("ext")


@pytest.mark.unit
def test_the_shipped_profile_is_secure_and_names_its_password_source():
    profile = load_environment(ENV)
    assert profile.security is not None and profile.security.password_env == "DIMSTER_SECURE_PASSWORD"
    assert (profile.security.protocol, profile.security.mechanism) == ("SASL_SSL", "SCRAM-SHA-512")


# ---- the broker's properties ------------------------------------------------------------------------
@pytest.fixture
def sec(project, monkeypatch) -> LocalCluster:
    """The cluster of a secure profile `sec` (never started), its password in DIMSTER_TEST_PASSWORD."""
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))
    monkeypatch.setenv("DIMSTER_TEST_PASSWORD", PASSWORD)
    write_environment(project, "sec", SECURE + "brokerPortBase: 24000\ncontrollerPortBase: 24010\n")
    cluster = LocalCluster(load_environment("sec"))
    return cluster


@pytest.mark.unit
def test_server_properties_offer_sasl_ssl_only_and_hold_no_password(sec):
    cluster = sec
    properties = cluster.node_properties(0, {})
    assert properties["listeners"] == "SASL_SSL://127.0.0.1:24000,CONTROLLER://127.0.0.1:24010"
    assert properties["advertised.listeners"] == "SASL_SSL://127.0.0.1:24000"
    assert properties["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL"
    assert properties["inter.broker.listener.name"] == "SASL_SSL"
    assert properties["ssl.keystore.password"] == "${env:DIMSTER_BROKER_PASSWORD}"
    jaas = properties["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    assert 'username="loadtest"' in jaas and 'password="${env:DIMSTER_BROKER_PASSWORD}"' in jaas
    assert PASSWORD not in cluster.node_config_text(0, {})
    assert cluster._broker_environment() == {"DIMSTER_BROKER_PASSWORD": PASSWORD}
    [flag, credential] = cluster._scram_users()
    assert flag == "--add-scram" and "name=loadtest" in credential and PASSWORD not in credential


@pytest.mark.unit
def test_the_salted_password_reaches_kafka_storage_through_a_pipe_not_its_command_line(sec, tmp_path):
    command, argfile = sec.format_command(KafkaDistribution("4.4.0", tmp_path, tmp_path), 0)
    assert command[-1] == "@/dev/stdin" and not any("scram" in arg.lower() for arg in command), command
    lines = argfile.splitlines()
    assert lines[:2] == ['"kafka.tools.StorageTool"', '"format"'] and lines[-2] == '"--add-scram"'
    assert 'saltedpassword=\\"' in lines[-1] and PASSWORD not in argfile


@pytest.mark.unit
def test_a_plaintext_profile_keeps_its_plaintext_listener(project, monkeypatch):
    monkeypatch.setenv("DIMSTER_PROJECT_DIR", str(project))
    cluster = LocalCluster(load_environment("local"))
    assert cluster.managed_properties(0)["inter.broker.listener.name"] == "PLAINTEXT"
    assert cluster.client_security() == {} and cluster._scram_users() == ()


@pytest.mark.unit
def test_a_keystore_refuses_only_another_password(tmp_path):
    material = make_tls_material(tmp_path / "tls", ["127.0.0.1"], "right")
    assert not refuses_password(material.keystore, "right")
    assert refuses_password(material.keystore, "wrong")
    assert not refuses_password(tmp_path / "none.p12", "right")  # none yet: cluster up makes one


@pytest.mark.unit
def test_another_password_than_the_clusters_is_one_line_before_anything_changes(sec, monkeypatch):
    cluster = sec
    cluster.check_password()  # no keystore yet
    cluster._make_tls_material()
    made = cluster.tls_files.keystore.read_bytes()
    cluster.check_password()
    monkeypatch.setenv("DIMSTER_TEST_PASSWORD", "not-the-password")
    with pytest.raises(DimsterError) as error:
        cluster.up(progress=lambda line: None)
    message = str(error.value)
    assert "the password in $DIMSTER_TEST_PASSWORD is not the one 'sec' was made with" in message, message
    assert "cluster down sec --purge" in message and PASSWORD not in message and "not-the-password" not in message
    assert cluster.tls_files.keystore.read_bytes() == made  # not made anew with the wrong password
    assert not (cluster.node_dir(0) / "data").exists()  # nothing formatted


# ---- the clients ----------------------------------------------------------------------------------
@pytest.mark.unit
def test_java_clients_get_kafkas_names_for_the_same_security():
    java = java_security(SECURITY)
    assert java["security.protocol"] == "SASL_SSL" and java["sasl.mechanism"] == "SCRAM-SHA-512"
    assert java["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="loadtest" password="p\\"w\\\\d";'
    )
    assert (java["ssl.truststore.type"], java["ssl.truststore.certificates"]) == ("PEM", SECURITY["ssl.ca.pem"])
    assert library("librdkafka").client_security(SECURITY) == SECURITY and library("java").client_security({}) == {}


@pytest.mark.unit
def test_every_role_gets_the_security_of_its_library_over_the_workloads_own():
    workload = Workload.model_validate(
        {"name": "w", **BASE, "clientLibrary": {"producer": "java"}, "kafkaConfig": {
            "commonConfig": {"security.protocol": "PLAINTEXT"}}}
    )  # fmt: skip
    producer = client_properties(workload, "h:1", SECURITY, "producer")
    consumer = client_properties(workload, "h:1", SECURITY, "share_consumer", "g")
    assert producer["security.protocol"] == consumer["security.protocol"] == "SASL_SSL"
    assert "sasl.jaas.config" in producer and "sasl.password" not in producer
    assert consumer["sasl.password"] == SECURITY["sasl.password"] and consumer["group.id"] == "g"


@pytest.mark.unit
def test_the_assignment_carries_the_security_and_the_redactor_masks_it():
    assignment = Assignment(0, "h:1", {}, [], [], 1, 5, "", "4.3.1", client_security=SECURITY)
    assert decode(encode(Assign(assignment))).assignment.client_security == SECURITY
    redactor = Redactor()
    redactor.learn({"clientSecurity": {**SECURITY, "sasl.password": PASSWORD}})
    assert PASSWORD not in redactor.text(f"failed with {PASSWORD}")
    assert redactor.redact(java_security({**SECURITY, "sasl.password": PASSWORD}))["sasl.jaas.config"] == "***"


# ---- a real cluster -------------------------------------------------------------------------------
def secure(*args: str, password: str | None = PASSWORD, timeout: float = 300, env: dict[str, str] | None = None):
    env = {**(env or {}), "DIMSTER_SECURE_PASSWORD": password or ""}
    return dimster(*args, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def secure_cluster(state_dir):
    """The scratch `localSecure` up once for the module; down at its end."""
    up = secure("cluster", "up", ENV)
    try:
        assert up.code == 0, up.stderr + up.stdout
        yield load_environment(ENV)
    finally:
        assert secure("cluster", "down", ENV, password=None).code == 0


def profile_beside(scratch_project: Path, cluster_dir: Path, folder: Path, workers: str) -> dict[str, str]:
    """A project beside the session's whose `localSecureBeside` is the scratch `localSecure` (same ports,
    same cluster folder) with other `workers` (YAML text); the environment that selects it."""
    project = copy_project(scratch_project, folder)
    text = (project / "run" / "environments" / f"{ENV}.yaml").read_text().replace("workers: 1\n", "")
    write_environment(project, f"{ENV}Beside", f"{text}dataDir: {cluster_dir}\n{workers}")
    return {"DIMSTER_PROJECT_DIR": str(project)}


@pytest.mark.kafka
@pytest.mark.parametrize(
    ("library", "workers"), [("librdkafka", "processes"), ("java", "agent"), ("librdkafka", "containers")]
)
def test_a_run_with_each_client_library_leaves_no_password_anywhere(
    secure_cluster, scratch_project, tmp_path, library, workers, request, spark
):
    """Local worker processes get the credentials through their pipe; an agent (`dimster worker serve`)
    and agent containers (`workers: {docker: 1}`) over their encrypted channel, in memory only."""
    workload = write_workload(tmp_path, f"secure-{workers}", warmupSeconds=1, durationSeconds=3, clientLibrary=library)
    results = tmp_path / "results"
    profile, env, agent_log = ENV, {}, tmp_path / "agent.log"
    with contextlib.ExitStack() as stack:
        if workers == "agent":
            address, agent_dir = f"127.0.0.1:{spare_ports(2)['brokerPortBase']}", tmp_path / "agent"
            agent_dir.mkdir()
            listed = f"workers:\n  - address: {address}\nworkerTokenFile: {write_token(tmp_path)}\n"
            profile, env = f"{ENV}Beside", profile_beside(scratch_project, secure_cluster.cluster_dir, tmp_path, listed)
            stack.enter_context(running_agent(address, tmp_path / "worker.token", agent_log, work_dir=agent_dir))
        if workers == "containers":
            podman, images = request.getfixturevalue("podman_service"), request.getfixturevalue("dimster_images")
            pool = f"workers: {{docker: 1, dockerHost: '{podman.url}', image: '{images.worker}'}}\n"
            profile, env = f"{ENV}Beside", profile_beside(scratch_project, secure_cluster.cluster_dir, tmp_path, pool)
        result = secure("run", profile, "-w", str(workload), "--results", str(results), "--no-summary", env=env)
        assert result.code == 0, result.stderr + result.stdout
        assert processes_showing(PASSWORD) == []  # the broker, still up, has it in its environment only
    bundle = only_bundle(results)
    totals = run_info(bundle)["totals"]
    assert totals["received"] > 0 and totals["received"] == totals["acked"], totals
    if workers == "processes":  # the summary and report once, as the end of a run writes them
        summarized(bundle, spark)
    assert files_holding(bundle, [PASSWORD]) == []
    assert PASSWORD not in result.stdout + result.stderr
    assert files_holding(secure_cluster.cluster_dir, [PASSWORD], "*.properties") == []
    assert files_holding(secure_cluster.cluster_dir, [PASSWORD]) == []
    connected = [e for e in events(bundle) if e["event"] == "agent_connected"]
    assert len(connected) == (0 if workers == "processes" else 1), connected
    if workers == "agent":
        assert connected[0]["address"] == address
        assert files_holding(agent_dir, [PASSWORD]) == [] and PASSWORD.encode() not in agent_log.read_bytes()


def events(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "events.jsonl").read_text().splitlines()]


def processes_showing(value: str) -> list[int]:
    """PIDs of processes whose command line holds `value` (what `ps` shows every user)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if value in " ".join(process.info["cmdline"] or []):
            found.append(process.pid)
    return found


@pytest.mark.kafka
def test_a_wrong_password_is_one_error_line_at_once(secure_cluster, tmp_path):
    workload = write_workload(tmp_path, "wrong", durationSeconds=5)
    for command in (("cluster", "status", ENV), ("run", ENV, "-w", str(workload), "--results", str(tmp_path))):
        result = secure(*command, password="not-the-password", timeout=60)
        assert result.code != 0 and len(result.error_lines) == 1, result.stderr
        [line] = result.error_lines  # the broker's refusal itself, not a connection that timed out
        assert f"'{ENV}' refused dimster's credentials" in line and "Authentication failed" in line, line
    assert not list(tmp_path.glob("*-wrong"))  # no bundle: the run never started


@pytest.mark.kafka
def test_without_the_password_the_commands_say_how_to_give_it(secure_cluster):
    result = secure("cluster", "status", ENV, password=None, timeout=60)
    assert result.code == 2 and len(result.error_lines) == 1
    assert "DIMSTER_SECURE_PASSWORD" in result.error_lines[0]


@pytest.mark.kafka
def test_no_plaintext_listener_is_offered(secure_cluster):
    bootstrap = secure_cluster.bootstrap_servers
    assert registered_brokers(bootstrap, timeout=3.0) == set()  # PLAINTEXT: no answer
    ssl_only = {"security.protocol": "SSL", "ssl.ca.location": str(secure_cluster.cluster_dir / "tls" / "ca.pem")}
    assert registered_brokers(bootstrap, timeout=3.0, security=ssl_only) == set()  # TLS without SASL
    status = json.loads(secure("cluster", "status", ENV, "--json").stdout)
    assert status["healthy"] and [n["registered"] for n in status["nodes"]] == [True]


@pytest.mark.kafka
def test_another_password_stops_nothing_and_makes_nothing_anew(secure_cluster):
    """Last in the module: it takes the cluster down and up again."""
    keystore = secure_cluster.cluster_dir / "tls" / "broker.p12"
    made = keystore.read_bytes()
    [node] = json.loads(secure("cluster", "status", ENV, "--json").stdout)["nodes"]
    wrong = f"the password in $DIMSTER_SECURE_PASSWORD is not the one '{ENV}' was made with"
    for command in (("cluster", "up", ENV), ("cluster", "restart", ENV, "--node", str(node["node_id"]))):
        result = secure(*command, password="not-the-password", timeout=60)
        assert result.code != 0 and len(result.error_lines) == 1 and wrong in result.error_lines[0], result.stderr
    [after] = json.loads(secure("cluster", "status", ENV, "--json").stdout)["nodes"]
    assert after["pid"] == node["pid"] and after["registered"], after  # the node was never stopped
    assert secure("cluster", "down", ENV, password=None).code == 0
    result = secure("cluster", "up", ENV, password="not-the-password", timeout=60)
    assert result.code != 0 and len(result.error_lines) == 1 and wrong in result.error_lines[0], result.stderr
    assert keystore.read_bytes() == made and not LocalCluster(secure_cluster).status().running
    up = secure("cluster", "up", ENV)  # the right password: the same data and keystore serve again
    assert up.code == 0, up.stderr + up.stdout
    assert keystore.read_bytes() == made
