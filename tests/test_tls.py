"""The TLS material of a SASL_SSL cluster (a CA whose key is kept nowhere, a PKCS12 keystore JDK 17
reads, the CA's PEM for clients) and the `--add-scram` argument that creates a SCRAM user from a salted
password, checked against RFC 7677's SCRAM-SHA-256 example. No broker: Python's ssl module stands in
for the TLS peers, keytool for the broker's JDK."""

import base64
import datetime
import hashlib
import hmac
import ipaddress
import os
import shutil
import socket
import ssl
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID

from dimster.cluster import tls
from dimster.cluster.tls import make_tls_material, scram_credential_argument, scram_salted_password
from dimster.errors import DimsterError

PASSWORD = "keystore-test-password"
HOSTS = ["localhost", "127.0.0.1", "::1"]


def load_keystore(path: Path, password: str = PASSWORD):
    return pkcs12.load_key_and_certificates(path.read_bytes(), password.encode())


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.unit
def test_material_is_a_ca_and_a_broker_certificate_for_every_host(tmp_path):
    material = make_tls_material(tmp_path / "tls", HOSTS, PASSWORD)
    key, cert, chain = load_keystore(material.keystore)
    ca = x509.load_pem_x509_certificate(material.ca_pem.read_bytes())

    assert sorted(p.name for p in (tmp_path / "tls").iterdir()) == ["broker.p12", "ca.pem"]  # no CA key kept
    assert mode(tmp_path / "tls") == 0o700 and mode(material.keystore) == mode(material.ca_pem) == 0o600
    assert chain == [ca] and key.public_key() == cert.public_key()
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert ca.not_valid_after_utc - ca.not_valid_before_utc > datetime.timedelta(days=3650)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert b"PRIVATE KEY" not in material.ca_pem.read_bytes()


@pytest.mark.unit
def test_material_is_reused_while_it_still_fits(tmp_path):
    folder = tmp_path / "tls"
    first = make_tls_material(folder, HOSTS, PASSWORD)
    made = (first.keystore.read_bytes(), first.ca_pem.read_bytes())
    folder.chmod(0o755)

    again = make_tls_material(folder, ["LOCALHOST", "127.0.0.1"], PASSWORD)  # a subset of the hosts
    assert (again.keystore.read_bytes(), again.ca_pem.read_bytes()) == made
    assert mode(folder) == 0o700


@pytest.mark.unit
@pytest.mark.parametrize("change", ["new host", "new password", "other ca.pem", "damaged keystore", "expiring"])
def test_material_is_made_anew_when_it_no_longer_fits(tmp_path, monkeypatch, change):
    folder = tmp_path / "tls"
    first = make_tls_material(folder, HOSTS, PASSWORD)
    old_ca = first.ca_pem.read_bytes()
    hosts, password = HOSTS, PASSWORD
    if change == "new host":
        hosts = [*HOSTS, "broker-1.example"]
    elif change == "new password":
        password = "another-password"
    elif change == "other ca.pem":
        first.ca_pem.write_bytes(make_tls_material(tmp_path / "other", HOSTS, PASSWORD).ca_pem.read_bytes())
    elif change == "damaged keystore":
        first.keystore.write_bytes(first.keystore.read_bytes()[:100])
    else:
        monkeypatch.setattr(tls, "RENEW_BEFORE", datetime.timedelta(days=3651))

    material = make_tls_material(folder, hosts, password)
    _, cert, _ = load_keystore(material.keystore, password)
    assert material.ca_pem.read_bytes() != old_ca
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(material.ca_pem.read_bytes()))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert len(sans) == len(hosts)  # the new host too
    assert mode(material.keystore) == mode(material.ca_pem) == 0o600


@pytest.mark.unit
def test_hosts_must_be_given(tmp_path):
    for hosts in ([], ["localhost", " "]):
        with pytest.raises(DimsterError):
            make_tls_material(tmp_path / "tls", hosts, PASSWORD)


def handshake(material: tls.TlsMaterial, tmp_path: Path, server_hostname: str) -> None:
    """A TLS handshake between a server with the broker's key and a client that trusts only ca.pem and
    checks `server_hostname` (as librdkafka does, through OpenSSL); raises ssl.SSLError if it fails."""
    key, cert, chain = load_keystore(material.keystore)
    pem = tmp_path / "broker.pem"
    pem.touch(mode=0o600)
    pem.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *chain])
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pem)
    client = ssl.create_default_context(cafile=material.ca_pem)
    server_end, client_end = socket.socketpair()
    server_end.settimeout(10)
    client_end.settimeout(10)

    def serve():
        try:
            server.wrap_socket(server_end, server_side=True).close()
        except (ssl.SSLError, OSError):
            server_end.close()  # the client's failure is what the test looks at

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        client.wrap_socket(client_end, server_hostname=server_hostname).close()
    finally:
        client_end.close()
        thread.join(10)


@pytest.mark.unit
def test_clients_that_trust_ca_pem_accept_the_broker_under_its_names_only(tmp_path):
    material = make_tls_material(tmp_path / "tls", HOSTS, PASSWORD)
    for host in HOSTS:
        handshake(material, tmp_path, host)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(material, tmp_path, "127.0.0.2")


@pytest.mark.unit
@pytest.mark.skipif(shutil.which("keytool") is None, reason="needs a JDK's keytool")
def test_the_jdk_reads_the_keystore(tmp_path):
    material = make_tls_material(tmp_path / "tls", HOSTS, PASSWORD)
    keytool = ["keytool", "-list", "-keystore", str(material.keystore), "-storetype", "PKCS12"]
    result = subprocess.run(
        [*keytool, "-storepass:env", "STOREPASS"],  # the password stays off the command line
        env={**os.environ, "STOREPASS": PASSWORD},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broker, " in result.stdout and "PrivateKeyEntry" in result.stdout


def hmac_digest(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, "sha256").digest()


@pytest.mark.unit
def test_salted_password_is_rfc_7677s():
    """RFC 7677 section 3: user "user", password "pencil"; the client proof and the server signature of
    the example follow from the salted password (RFC 5802 section 3)."""
    client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    client_final_bare = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    salted = scram_salted_password("pencil", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096, "SCRAM-SHA-256")

    auth_message = f"{client_first_bare},{server_first},{client_final_bare}".encode()
    client_key = hmac_digest(salted, b"Client Key")
    client_signature = hmac_digest(hashlib.sha256(client_key).digest(), auth_message)
    proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
    assert base64.b64encode(proof) == b"dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    server_signature = hmac_digest(hmac_digest(salted, b"Server Key"), auth_message)
    assert base64.b64encode(server_signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def parse_like_kafka(argument: str) -> tuple[str, dict[str, str]]:
    """Kafka's ScramParser: MECHANISM=[k=v,...], each value's surrounding double quotes dropped."""
    mechanism, _, config = argument.strip().partition("=")
    assert config.startswith("[") and config.endswith("]")
    fields = {}
    for component in config[1:-1].split(","):
        key, _, value = component.partition("=")
        fields[key] = value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
    return mechanism, fields


@pytest.mark.unit
@pytest.mark.parametrize("mechanism,digest", [("SCRAM-SHA-512", "sha512"), ("SCRAM-SHA-256", "sha256")])
def test_add_scram_argument_holds_the_salted_password_not_the_password(mechanism, digest):
    password = "pässwörd-with=signs,and commas"
    argument = scram_credential_argument("alice", password, mechanism, 4096)
    parsed_mechanism, fields = parse_like_kafka(argument)

    assert parsed_mechanism == mechanism and password not in argument
    assert set(fields) == {"name", "iterations", "salt", "saltedpassword"}
    assert fields["name"] == "alice" and fields["iterations"] == "4096"
    salt = base64.b64decode(fields["salt"], validate=True)
    salted = base64.b64decode(fields["saltedpassword"], validate=True)
    assert salted == hashlib.pbkdf2_hmac(digest, password.encode(), salt, 4096)
    _, again = parse_like_kafka(scram_credential_argument("alice", password))
    assert len(salt) >= 16 and again["salt"] != fields["salt"]


@pytest.mark.unit
@pytest.mark.parametrize(
    "user,mechanism,iterations",
    [
        ("alice", "SCRAM-SHA-1", 8192),
        ("alice", "SCRAM-SHA-512", 4095),
        ("alice", "SCRAM-SHA-512", 16385),
        ("al,ice", "SCRAM-SHA-512", 8192),
        ('"alice"', "SCRAM-SHA-512", 8192),
        ("", "SCRAM-SHA-512", 8192),
    ],
)
def test_add_scram_argument_refuses_what_kafka_would(user, mechanism, iterations):
    with pytest.raises(DimsterError):
        scram_credential_argument(user, "secret", mechanism, iterations)
