"""Security material for a local cluster with SASL_SSL listeners and SCRAM users.

A CA, a broker certificate it signs, and the two files Kafka and its clients read: `broker.p12` (the
broker's key and certificate chain, for `ssl.keystore.*`) and `ca.pem` (the CA certificate, for
librdkafka's `ssl.ca.location` and the Java client's `ssl.truststore.type=PEM`). All of it is made at
once, so the CA key is never written anywhere: nothing needs it once the broker certificate is signed,
and when the hosts change everything is made anew (the clients then read the new `ca.pem`).

SCRAM users are created by `kafka-storage format --add-scram` from a salted password, never the
password itself, so that no password shows on a command line (Kafka's `ScramParser`).
"""

import base64
import datetime
import hashlib
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from pydantic import BaseModel, ConfigDict, Field, model_validator

from dimster.errors import DimsterError
from dimster.paths import project_dir
from dimster.workload.strict import EitherCase

KEYSTORE = "broker.p12"
CA_PEM = "ca.pem"
KEY_ALIAS = b"broker"  # the keystore entry's alias, as `keytool -list` shows it
VALID_FOR = datetime.timedelta(days=3650)
RENEW_BEFORE = datetime.timedelta(days=30)  # material that expires sooner than this is made anew


class Security(BaseModel):
    """`security:` of a local profile: SASL_SSL listeners with one SCRAM user. The password is named,
    never written: an environment variable (`passwordEnv`) or a file (`passwordFile`)."""

    model_config = ConfigDict(extra="forbid", validate_by_name=False, validate_by_alias=True)
    protocol: Annotated[Literal["SASL_SSL"], EitherCase()] = "SASL_SSL"  # Kafka reads it in any case
    mechanism: Literal["SCRAM-SHA-256", "SCRAM-SHA-512"] = "SCRAM-SHA-512"
    user: str = Field("dimster", pattern=r"^[A-Za-z0-9._@-]+$")
    password_env: str | None = Field(None, alias="passwordEnv", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    password_file: str | None = Field(None, alias="passwordFile", min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _no_inline_password(cls, data):
        if isinstance(data, dict):
            inline = [k for k in data if "password" in str(k).lower() and k not in ("passwordEnv", "passwordFile")]
            if inline:
                raise ValueError(
                    f"{', '.join(inline)}: a password is never written in a profile; "
                    "use passwordEnv: NAME or passwordFile: FILE"
                )
        return data

    @model_validator(mode="after")
    def _one_source(self):
        if (self.password_env is None) == (self.password_file is None):
            raise ValueError("give the password's source: passwordEnv: NAME or passwordFile: FILE (one of them)")
        return self

    def password_source(self) -> str:
        """Where the password is read from, in the user's words."""
        return f"${self.password_env}" if self.password_env else f"file {self.password_file}"

    def password(self, profile_name: str) -> str:
        """The user's password from its variable or file; one line saying how to provide it when it is missing."""
        where = f"run/environments/{profile_name}.yaml"
        if self.password_env:
            password = os.environ.get(self.password_env, "")
            if not password:
                raise DimsterError(
                    f"'{profile_name}' needs the password of SCRAM user {self.user} in the environment "
                    f"variable {self.password_env} (security.passwordEnv in {where}): export it, or name a file "
                    "with security.passwordFile"
                )
            return password
        path = Path(self.password_file or "").expanduser()
        path = path if path.is_absolute() else project_dir() / path
        try:
            password = path.read_text().strip()
        except OSError as e:
            raise DimsterError(
                f"'{profile_name}' reads the password of SCRAM user {self.user} from {self.password_file} "
                f"(security.passwordFile in {where}), which is unreadable: {e.strerror}"
            ) from None
        if not password:
            raise DimsterError(
                f"{self.password_file} (security.passwordFile in {where}) is empty: write the password in it"
            )
        return password

    def client_properties(self, password: str, ca_pem: str) -> dict[str, str]:
        """What a client needs to reach the SASL_SSL listeners, in librdkafka's names (see
        clients/properties.py for Kafka's Java names): the CA certificate itself, not its file, so
        that clients on other hosts can use it too."""
        return {
            "security.protocol": self.protocol,
            "sasl.mechanisms": self.mechanism,
            "sasl.username": self.user,
            "sasl.password": password,
            "ssl.ca.pem": ca_pem,
        }


SCRAM_DIGESTS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
SCRAM_ITERATIONS = range(4096, 16384 + 1)  # Kafka's ScramMechanism.minIterations/maxIterations


@dataclass(frozen=True)
class TlsMaterial:
    keystore: Path  # PKCS12, encrypted with the password given: ssl.keystore.location
    ca_pem: Path  # the CA certificate: ssl.ca.location (librdkafka), ssl.truststore.location (Java, PEM)


def tls_material(folder: Path) -> TlsMaterial:
    """Where the CA and the broker keystore made in `folder` are."""
    return TlsMaterial(keystore=folder / KEYSTORE, ca_pem=folder / CA_PEM)


def make_tls_material(folder: Path, hosts: list[str], password: str) -> TlsMaterial:
    """The CA and broker keystore in `folder` (0700, files 0600) for a broker reached as any of `hosts`
    (names or IP addresses): the existing ones when they still cover those hosts, open with `password`
    and are not about to expire, otherwise new ones."""
    names = _subject_alt_names(hosts)
    material = tls_material(folder)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    if not _still_valid(material, names, password):
        ca_pem, keystore = _new_material(names, password)
        _write_private(material.keystore, keystore)  # the keystore first: a crash in between leaves a
        _write_private(material.ca_pem, ca_pem)  # pair that does not match, which the next call remakes
    return material


def refuses_password(keystore: Path, password: str) -> bool:
    """Whether `keystore` exists and does not open with `password`."""
    try:
        pkcs12.load_key_and_certificates(keystore.read_bytes(), password.encode())
    except FileNotFoundError:
        return False
    except ValueError:  # another password (or a file that is no keystore)
        return True
    return False


def _subject_alt_names(hosts: list[str]) -> list[x509.GeneralName]:
    names: dict[str, x509.GeneralName] = {}
    for host in hosts:
        host = host.strip().lower()
        if not host:
            raise DimsterError(f"a TLS host name must not be empty: {hosts}")
        try:
            names[host] = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            names[host] = x509.DNSName(host)
    if not names:
        raise DimsterError("TLS material needs at least one host name or IP address")
    return list(dict.fromkeys(names.values()))


def _still_valid(material: TlsMaterial, names: list[x509.GeneralName], password: str) -> bool:
    try:
        key, cert, chain = pkcs12.load_key_and_certificates(material.keystore.read_bytes(), password.encode())
        ca = x509.load_pem_x509_certificate(material.ca_pem.read_bytes())
        if key is None or cert is None or ca not in chain or key.public_key() != cert.public_key():
            return False
        cert.verify_directly_issued_by(ca)
        covered = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False  # missing, unreadable, another password, or not made by this module
    renew_at = datetime.datetime.now(datetime.UTC) + RENEW_BEFORE
    return all(name in covered for name in names) and min(cert.not_valid_after_utc, ca.not_valid_after_utc) > renew_at


def _new_material(names: list[x509.GeneralName], password: str) -> tuple[bytes, bytes]:
    """(ca.pem, broker.p12) of a new CA and a broker certificate it signs; the CA key is dropped."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dimster local Kafka CA")])
    ca = (
        _certificate(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dimster local Kafka broker")])
    broker = (
        _certificate(broker_name, ca_name, broker_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    # PBES2 with AES-256-CBC and an HMAC-SHA256 MAC: what JDK 17's PKCS12 KeyStore reads (and writes)
    encryption = (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(10000)
        .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
        .hmac_hash(hashes.SHA256())
        .build(password.encode())
    )
    keystore = pkcs12.serialize_key_and_certificates(KEY_ALIAS, broker_key, broker, [ca], encryption)
    return ca.public_bytes(serialization.Encoding.PEM), keystore


def _certificate(subject: x509.Name, issuer: x509.Name, public_key, now: datetime.datetime) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))  # tolerates a clock a little behind
        .not_valid_after(now + VALID_FOR)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(**usages: bool) -> x509.KeyUsage:
    kinds: tuple[str, ...] = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment")
    kinds += ("key_agreement", "key_cert_sign", "crl_sign", "encipher_only", "decipher_only")
    return x509.KeyUsage(**{kind: usages.get(kind, False) for kind in kinds})


def _write_private(path: Path, data: bytes) -> None:
    """Atomically, readable by the user only."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)  # also when an earlier .tmp was left with another mode
        f.write(data)
    tmp.replace(path)


def scram_salted_password(password: str, salt: bytes, iterations: int, mechanism: str = "SCRAM-SHA-512") -> bytes:
    """RFC 5802's SaltedPassword = Hi(password, salt, i), which is PBKDF2 with HMAC and the output length
    of the hash; Kafka takes the password's UTF-8 bytes as they are (ScramFormatter.normalize)."""
    return hashlib.pbkdf2_hmac(_digest(mechanism), password.encode(), salt, iterations)


def scram_credential_argument(
    user: str, password: str, mechanism: str = "SCRAM-SHA-512", iterations: int = 8192
) -> str:
    """The value of `kafka-storage format --add-scram` that creates `user` with `password` from a random
    salt and the salted password (both base64), so the password itself is on no command line."""
    _digest(mechanism)
    if iterations not in SCRAM_ITERATIONS:
        raise DimsterError(
            f"SCRAM iterations must be {SCRAM_ITERATIONS.start} to {SCRAM_ITERATIONS.stop - 1}, not {iterations}"
        )
    if not user or any(c in user for c in ',"') or user != user.strip():
        raise DimsterError(f"a SCRAM user name for --add-scram has no comma, quote or outer blank: {user!r}")
    salt = secrets.token_bytes(32)
    salted = scram_salted_password(password, salt, iterations, mechanism)
    b64 = base64.b64encode  # Kafka decodes with java.util.Base64.getDecoder(): the standard alphabet, padded
    return (
        f'{mechanism}=[name={user},iterations={iterations},salt="{b64(salt).decode()}",'
        f'saltedpassword="{b64(salted).decode()}"]'
    )


def _digest(mechanism: str) -> str:
    try:
        return SCRAM_DIGESTS[mechanism]
    except KeyError:
        raise DimsterError(f"SCRAM mechanism must be one of {', '.join(SCRAM_DIGESTS)}, not {mechanism!r}") from None
