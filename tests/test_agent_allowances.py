"""What a token allows: an agent refuses client properties that load code, run a command or name a
file or URL on its host, unless its operator allows them (`--allow-property`, `--allow-files-under`);
what dimster itself sends passes without either. The rule alone, then a real agent on loopback."""

import pytest
import zmq

from dimster.cluster.tls import Security
from dimster.errors import DimsterError
from dimster.kafka.security import java_security
from dimster.remote.allowances import LOGIN_MODULES, Allowances
from dimster.worker.protocol import Assign, Assignment, Failed, LogFileSent, Ready, Update, encode
from dimster.workload.model import Workload
from tests.agents import answer, claim, idle, release, running_agent, write_token
from tests.conftest import dimster, spare_ports

pytestmark = pytest.mark.unit

PLAIN, SCRAM, OAUTH = LOGIN_MODULES
CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
# dimster's own client security of a secure profile (cluster/tls.py), a password with JAAS's specials
OWN_SECURITY = Security(passwordEnv="X").client_properties('pa"ss\\word', CA_PEM)


def workload(library: str = "librdkafka", section: str = "commonConfig", **properties) -> Workload:
    return Workload.model_validate({"name": "w", "clientLibrary": library, "kafkaConfig": {section: properties}})


def refusal(allowances: Allowances, name: str, value: str, section: str = "commonConfig") -> str:
    with pytest.raises(DimsterError) as refused:
        allowances.check(workload(section=section, **{name: value}), {})
    return str(refused.value)


REFUSED = [  # (property, value, what the refusal says it does)
    ("plugin.library.paths", "/tmp/evil", "loads code"),
    ("ssl.engine.location", "/tmp/engine.so", "loads code"),
    ("ssl.providers", "/tmp/provider.so", "loads code"),
    ("interceptor.classes", "com.example.Spy", "loads code"),
    ("metric.reporters", "com.example.Reporter", "loads code"),
    ("config.providers", "file", "loads code"),
    ("config.providers.file.class", "org.apache.kafka.common.config.provider.FileConfigProvider", "loads code"),
    ("security.providers", "com.example.Creator", "loads code"),
    ("sasl.login.class", "com.example.Login", "loads code"),
    ("sasl.login.callback.handler.class", "com.example.Handler", "loads code"),
    ("sasl.client.callback.handler.class", "com.example.Handler", "loads code"),
    ("ssl.engine.factory.class", "com.example.Factory", "loads code"),
    ("value.serializer", "com.example.Serializer", "loads code"),
    ("partitioner.class", "com.example.Partitioner", "loads code"),
    ("partition.assignment.strategy", "range,com.example.Assignor", "loads code"),
    ("some.future.callback.class", "com.example.X", "loads code"),  # by its ending
    ("sasl.kerberos.kinit.cmd", "touch /tmp/pwned", "runs a command"),
    ("sasl.kerberos.principal", "x; touch /tmp/pwned", "runs a command"),
    ("sasl.mechanism", "GSSAPI", "runs a command"),
    ("sasl.mechanisms", "GSSAPI", "runs a command"),
    ("ssl.key.location", "/etc/ssl/private/key.pem", "reads the file /etc/ssl/private/key.pem"),
    ("ssl.certificate.location", "/etc/passwd", "reads the file /etc/passwd"),
    ("ssl.ca.location", "/etc/passwd", "reads the file /etc/passwd"),
    ("ssl.crl.location", "/etc/passwd", "reads the file /etc/passwd"),
    ("ssl.keystore.location", "/etc/passwd", "reads the file /etc/passwd"),
    ("ssl.truststore.location", "/etc/passwd", "reads the file /etc/passwd"),
    ("sasl.kerberos.keytab", "/etc/krb5.keytab", "reads the file /etc/krb5.keytab"),
    ("sasl.oauthbearer.assertion.private.key.file", "/etc/passwd", "reads the file /etc/passwd"),
    ("offset.store.path", "/var/tmp", "reads the file /var/tmp"),
    ("sasl.oauthbearer.token.endpoint.url", "https://169.254.169.254/token", "connects to a URL"),
    ("sasl.oauthbearer.token.endpoint.url", "file:///etc/passwd", "reads the file /etc/passwd"),
    ("sasl.oauthbearer.metadata.authentication.type", "azure_imds", "connects to a URL"),
]


@pytest.mark.parametrize(("name", "value", "does"), REFUSED, ids=[f"{n}={v}" for n, v, _ in REFUSED])
def test_a_property_that_loads_code_runs_a_command_or_names_a_file_is_refused(name, value, does):
    line = refusal(Allowances(), name, value)
    assert line.startswith(f"kafkaConfig.commonConfig.{name} ") and does in line, line
    assert line.endswith(f"--allow-property {name})"), line  # how the operator allows it
    assert "\n" not in line


@pytest.mark.parametrize("section", ["producerConfig", "consumerConfig", "shareConsumerConfig"])
def test_every_section_that_becomes_client_properties_is_judged(section):
    line = refusal(Allowances(), "plugin.library.paths", "/tmp/evil", section)
    assert line.startswith(f"kafkaConfig.{section}.plugin.library.paths loads code on the agent's host: refused")


def test_properties_that_load_run_and_read_nothing_need_no_permission():
    harmless = {
        "acks": "all",
        "linger.ms": 5,
        "enable.idempotence": True,
        "ssl.ca.pem": CA_PEM,  # the certificate itself, not a file
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": CA_PEM,
        "bootstrap.servers": "kafka-1:9092",
        "partition.assignment.strategy": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
        "partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.metadata.authentication.type": "none",
        "interceptor.classes": "",  # an empty list loads nothing
    }
    for library in ("librdkafka", "java"):
        Allowances().check(workload(library, **harmless), {})


@pytest.mark.parametrize("library", ["librdkafka", "java"])
def test_dimsters_own_security_passes_without_any_permission(library):
    Allowances().check(workload(library), OWN_SECURITY)
    assert SCRAM in java_security(OWN_SECURITY)["sasl.jaas.config"]  # the Java clients' mapping was judged too


@pytest.mark.parametrize(
    "jaas",
    [
        f'{PLAIN} required username="alice" password="a \\"quoted\\" p/w;";',
        f"{SCRAM} required username=alice password=secret tokenauth=true;",
        f'{OAUTH} required unsecuredLoginStringClaim_sub="alice" clientId="c" clientSecret="s";',
        f'  {SCRAM}\n  REQUIRED\n  username="a";\n',
    ],
    ids=["plain", "scram", "oauthbearer", "scram-over-lines"],
)
def test_kafkas_own_login_modules_with_simple_options_need_no_permission(jaas):
    Allowances().check(workload("java", **{"sasl.jaas.config": jaas}), {})


@pytest.mark.parametrize(
    ("jaas", "said"),
    [
        ("com.sun.security.auth.module.JndiLoginModule required user.provider.url=x;", "names the login module com"),
        ("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;", "Krb5LoginModule, not Kafka's own"),
        (f'{PLAIN} required username="a"; {SCRAM} required;', "not one login module"),
        (f'{PLAIN} required username="a\npassword=x";', "not one login module"),  # Kafka ends a quote at a line's end
        (f"{PLAIN} required /* a comment */ username=a;", "not one login module"),
        (f"{PLAIN} required username='a';", "not one login module"),
        (f'{OAUTH} required ssl.truststore.location="/etc/passwd";', "has the option ssl.truststore.location"),
    ],
    ids=["jndi", "kerberos", "two-modules", "newline-in-quote", "comment", "single-quotes", "file-option"],
)
def test_any_other_jaas_config_is_refused(jaas, said):
    line = refusal(Allowances(), "sasl.jaas.config", jaas)
    assert said in line and line.endswith("--allow-property sasl.jaas.config)"), line


def test_a_security_that_breaks_out_of_dimsters_jaas_quoting_is_refused_for_java_clients():
    hostile = {**OWN_SECURITY, "sasl.username": 'x"\ncom.sun.security.auth.module.JndiLoginModule required'}
    Allowances().check(workload("librdkafka"), hostile)  # librdkafka takes the name as it is
    with pytest.raises(DimsterError, match=r"^clientSecurity \(java\)\.sasl\.jaas\.config is not one login module"):
        Allowances().check(workload("java"), hostile)


def test_a_client_security_carrying_a_plugin_is_refused():
    with pytest.raises(DimsterError, match=r"^clientSecurity \(librdkafka\)\.plugin\.library\.paths loads code"):
        Allowances().check(workload(), {"security.protocol": "PLAINTEXT", "plugin.library.paths": "/tmp/evil"})


def test_sasl_without_a_mechanism_is_kerberos_and_refused_unless_allowed():
    sasl = workload(**{"security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(DimsterError, match=r"without sasl.mechanisms means Kerberos \(GSSAPI\), which runs kinit"):
        Allowances().check(sasl, {})
    Allowances(frozenset({"sasl.mechanisms"})).check(sasl, {})
    Allowances().check(workload(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}), {})


def test_allow_property_lets_exactly_that_property_through():
    allowed = Allowances.of_options(["plugin.library.paths", "sasl.jaas.config"], [])
    allowed.check(workload(**{"plugin.library.paths": "/opt/plugins/monitor"}), {})
    allowed.check(workload("java", **{"sasl.jaas.config": "com.example.Login required;"}), {})
    assert "--allow-property sasl.kerberos.kinit.cmd" in refusal(allowed, "sasl.kerberos.kinit.cmd", "kinit")


def test_allow_property_names_only_properties_the_agent_refuses():
    with pytest.raises(DimsterError, match=r"^--allow-property acks: not a property the agent refuses"):
        Allowances.of_options(["acks"], [])


def test_files_pass_only_under_the_operators_folder(tmp_path):
    allowed_dir, outside = tmp_path / "certs", tmp_path / "elsewhere"
    allowed_dir.mkdir(), outside.mkdir()
    (allowed_dir / "ca.pem").write_text(CA_PEM)
    (outside / "secret.pem").write_text("secret")
    (allowed_dir / "link.pem").symlink_to(outside / "secret.pem")
    allowed = Allowances.of_options([], [allowed_dir])
    allowed.check(workload(**{"ssl.ca.location": str(allowed_dir / "ca.pem")}), {})
    allowed.check(workload(**{"sasl.oauthbearer.token.endpoint.url": (allowed_dir / "ca.pem").as_uri()}), {})
    for escaping in (allowed_dir / ".." / "elsewhere" / "secret.pem", allowed_dir / "link.pem", outside / "secret.pem"):
        line = refusal(allowed, "ssl.ca.location", str(escaping))
        assert f"outside the folders it allows files under ({allowed_dir})" in line, line
        assert line.endswith("--allow-files-under DIR, or --allow-property ssl.ca.location)")
    assert "loads code" in refusal(allowed, "plugin.library.paths", str(allowed_dir / "ca.pem"))  # code is not a file


# ---- a real agent on loopback --------------------------------------------------------------------
@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    folder = tmp_path_factory.mktemp("allowing-agent")
    certs = folder / "certs"
    certs.mkdir()
    (certs / "ca.pem").write_text(CA_PEM)
    (folder / "secret.pem").write_text("secret")
    (certs / "link.pem").symlink_to(folder / "secret.pem")
    address = f"127.0.0.1:{spare_ports(4)['brokerPortBase'] + 11}"
    options = ("--allow-property", "sasl.kerberos.kinit.cmd", "--allow-files-under", str(certs))
    with running_agent(address, write_token(folder), folder / "agent.log", options=options):
        yield address, certs


def assignment(security: dict | None = None, **properties) -> Assignment:
    work = workload(**properties).model_dump(by_alias=True)
    return Assignment(0, "127.0.0.1:9", work, [], [], 1, 5, "", "4.3.1", client_security=security or {})


def assigned(address: str, message: Assignment) -> tuple[object, list]:
    """The agent's answer to an Assign of `message`, and what it answered on release."""
    context = zmq.Context()
    try:
        owner = claim(context, address, "allowances")
        owner.send(encode(Assign(message)))
        first = answer(owner)
        return first, release(context, address, owner)
    finally:
        context.term()


def test_the_agent_refuses_an_assign_naming_the_property_and_goes_on_serving(agent):
    address, certs = agent
    for name, value in [("plugin.library.paths", "/tmp/evil"), ("ssl.ca.location", str(certs / "link.pem"))]:
        refused, _ = assigned(address, assignment(**{name: value}))
        assert isinstance(refused, Failed), refused
        assert f": kafkaConfig.commonConfig.{name} " in refused.reason and "--allow-property" in refused.reason
        assert idle(address)


def test_the_agent_starts_a_worker_for_what_its_operator_allows(agent):
    address, certs = agent
    allowed = {"sasl.kerberos.kinit.cmd": "/usr/bin/kinit -R", "ssl.ca.location": str(certs / "ca.pem")}
    ready, released = assigned(address, assignment(OWN_SECURITY, **allowed))
    assert isinstance(ready, Ready), ready
    assert [m.name for m in released if isinstance(m, LogFileSent)] == ["worker-0.log"]


def test_a_live_update_is_judged_too(agent):
    address, _ = agent
    context = zmq.Context()
    try:
        owner = claim(context, address, "allowances")
        owner.send(encode(Assign(assignment())))
        assert isinstance(answer(owner), Ready)
        hostile = workload(**{"interceptor.classes": "com.example.Spy"}).model_dump(by_alias=True)
        owner.send(encode(Update(hostile, 1)))
        refused = answer(owner)
        assert isinstance(refused, Failed), refused
        assert "kafkaConfig.commonConfig.interceptor.classes loads code" in refused.reason
        release(context, address, owner)
    finally:
        context.term()
    assert idle(address)


def test_allow_files_under_a_missing_folder_is_one_line(tmp_path):
    missing = tmp_path / "no-such-folder"
    address = f"127.0.0.1:{spare_ports(4)['brokerPortBase'] + 12}"
    token = str(write_token(tmp_path))
    result = dimster("worker", "serve", "--listen", address, "--token-file", token, "--allow-files-under", str(missing))
    assert result.code != 0
    said = f"--allow-files-under {missing}: no such folder (give a folder that exists)"
    assert result.error_lines == [f"dimster: error: {said}"]
    assert "Traceback" not in result.stderr
