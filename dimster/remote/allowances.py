"""What a coordinator holding the worker token may make an agent's clients do on the agent's host.

A run's client properties reach an agent in its Assign and live Updates (the workload's kafkaConfig
commonConfig, producerConfig, consumerConfig and shareConsumerConfig) and in the Assign's client
security, and become the properties of librdkafka or Kafka's Java clients there. Some properties
load code, run a command, or name a file or a URL on the agent's host: the agent refuses them unless
its operator allows them (`dimster worker serve --allow-property NAME`; a file property also when
its file lies under a folder of `--allow-files-under DIR`).

RESTRICTED is both libraries' configuration references (librdkafka's CONFIGURATION.md; Kafka's
producer and consumer configs, their CLASS and class-list types) read for that. A name is judged
the same whichever library runs it, and names a later version adds are caught by their endings
(`.class`, `.location`, `.file`, `.url`, `.cmd`). Properties librdkafka takes only through its API
(`*_cb`, `opaque`, `interceptors`) take no text: confluent-kafka refuses a string for them. Topic,
broker and group configs never reach an agent (the coordinator applies them through the Admin API).
"""

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from dimster.clients import library
from dimster.clients.properties import ROLE_SECTIONS, role_properties, run_libraries
from dimster.errors import DimsterError
from dimster.kafka.properties import property_text
from dimster.workload.model import Workload

CODE = "loads code on the agent's host"
COMMAND = "runs a command on the agent's host"
FILE = "reads a file on the agent's host"
URL = "connects to a URL from the agent's host"
RESTRICTED: dict[str, str] = {
    # librdkafka
    "plugin.library.paths": CODE,  # dlopen()ed
    "ssl.engine.location": CODE,  # an OpenSSL engine library
    "ssl.providers": CODE,  # OpenSSL 3 providers: a name may be a module's path
    "sasl.kerberos.kinit.cmd": COMMAND,  # a shell command, at start and every relogin (Java: kinit's path)
    "sasl.kerberos.principal": COMMAND,  # put into that shell command
    "sasl.kerberos.keytab": FILE,  # read by kinit, put into that shell command
    "ssl.key.location": FILE,
    "ssl.certificate.location": FILE,
    "ssl.ca.location": FILE,  # a file or a folder; `probe`: the system's usual paths
    "https.ca.location": FILE,
    "ssl.crl.location": FILE,
    "ssl.keystore.location": FILE,  # Java too
    "sasl.oauthbearer.assertion.private.key.file": FILE,  # Java too
    "sasl.oauthbearer.assertion.file": FILE,  # Java too
    "sasl.oauthbearer.assertion.jwt.template.file": FILE,
    "offset.store.path": FILE,  # the legacy consumer writes its offsets there
    "sasl.oauthbearer.token.endpoint.url": URL,  # Java too (and file: URLs)
    "sasl.oauthbearer.metadata.authentication.type": URL,  # azure_imds: the host's own cloud identity
    # Kafka's Java clients
    "key.serializer": CODE,
    "value.serializer": CODE,
    "key.deserializer": CODE,
    "value.deserializer": CODE,
    "partitioner.class": CODE,
    "partition.assignment.strategy": CODE,  # librdkafka: names of its own assignors
    "interceptor.classes": CODE,
    "metric.reporters": CODE,
    "config.providers": CODE,  # and config.providers.NAME.class: FileConfigProvider reads files
    "security.providers": CODE,
    "sasl.login.class": CODE,
    "sasl.login.callback.handler.class": CODE,
    "sasl.client.callback.handler.class": CODE,
    "sasl.oauthbearer.jwt.retriever.class": CODE,
    "sasl.oauthbearer.jwt.validator.class": CODE,
    "ssl.engine.factory.class": CODE,
    "sasl.jaas.config": CODE,  # a login module is a class
    "ssl.truststore.location": FILE,
    "sasl.oauthbearer.assertion.template.file": FILE,
    "sasl.oauthbearer.jwks.endpoint.url": URL,
    # both: GSSAPI (Kerberos) runs kinit and reads keytabs
    "sasl.mechanism": COMMAND,
    "sasl.mechanisms": COMMAND,
}
ENDINGS = {
    ".class": CODE, ".classes": CODE, ".cmd": COMMAND, ".location": FILE, ".file": FILE, ".path": FILE, ".url": URL,
}  # fmt: skip
PREFIXES = {"config.providers.": CODE}

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
ASSIGNORS = (
    "range",
    "roundrobin",
    "cooperative-sticky",
    *(
        f"org.apache.kafka.clients.consumer.{kind}Assignor"
        for kind in ("Range", "RoundRobin", "Sticky", "CooperativeSticky")
    ),
)
# values that need no permission: Kafka's and librdkafka's own, which load, run and read nothing more
HARMLESS: dict[str, tuple[str, ...]] = {
    "sasl.mechanism": MECHANISMS,
    "sasl.mechanisms": MECHANISMS,
    "partition.assignment.strategy": ASSIGNORS,  # each of a comma-separated list
    "partitioner.class": ("org.apache.kafka.clients.producer.RoundRobinPartitioner",),
    "sasl.oauthbearer.metadata.authentication.type": ("none",),
}
LOGIN_MODULES = (
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
)
# One JAAS login module with simple options, as Kafka's JaasConfig reads it: a quoted value ends at a
# line's end there, so none may hold one; outside quotes only words, `=`, blanks and the final `;`.
_WORD = r"[A-Za-z0-9_.$-]+"
_OPTION = rf'[ \t\r\n]+{_WORD}[ \t\r\n]*=[ \t\r\n]*(?:"(?:[^"\\\r\n]|\\[^\r\n])*"|{_WORD})'
JAAS = re.compile(
    rf"[ \t\r\n]*({_WORD})[ \t\r\n]+(?i:required|requisite|sufficient|optional)((?:{_OPTION})*)[ \t\r\n]*;[ \t\r\n]*"
)
OPTION_KEY = re.compile(rf"[ \t\r\n]+({_WORD})[ \t\r\n]*=")
# the names each library reads the SASL mechanism from; without one it is GSSAPI
MECHANISM_NAMES = {"librdkafka": ("sasl.mechanisms", "sasl.mechanism"), "java": ("sasl.mechanism",)}


def restriction(name: str) -> str | None:
    """What a client property does on the host that needs the operator's permission, or None."""
    if name in RESTRICTED:
        return RESTRICTED[name]
    ending = next((e for e in ENDINGS if name.endswith(e)), None)
    prefix = next((p for p in PREFIXES if name.startswith(p)), None)
    return ENDINGS[ending] if ending else PREFIXES[prefix] if prefix else None


def jaas_problem(value: str) -> str | None:
    """Why a sasl.jaas.config needs the operator's permission, or None for one of Kafka's own modules."""
    match = JAAS.fullmatch(value)
    if match is None:
        return f'is not one login module with simple options (key=word or key="text"); a login module {CODE}'
    if match.group(1) not in LOGIN_MODULES:
        return f"names the login module {match.group(1)}, not Kafka's own PLAIN, SCRAM or OAUTHBEARER one; it {CODE}"
    # an option is a property of the login (OAUTHBEARER's token requests read ssl.* options)
    options = re.sub(r'"(?:[^"\\]|\\.)*"', '""', match.group(2))
    for key in OPTION_KEY.findall(options):
        if restriction(key):
            return f"has the option {key}, which {restriction(key)}"
    return None


@dataclass(frozen=True)
class Allowances:
    """What this agent's operator allows beyond the harmless: property names, and folders whose files
    the clients may read (resolved)."""

    properties: frozenset[str] = frozenset()
    folders: tuple[Path, ...] = ()

    @classmethod
    def of_options(cls, properties: Iterable[str], folders: Iterable[Path]) -> "Allowances":
        """From `dimster worker serve`'s options: a name or a folder that is not one is one error line."""
        for name in properties:
            if restriction(name) is None:
                raise DimsterError(
                    f"--allow-property {name}: not a property the agent refuses (those that load code, run a "
                    "command, or name a file or URL on its host: docs/distributed.md lists them)"
                )
        resolved = []
        for folder in folders:
            if not folder.is_dir():
                raise DimsterError(f"--allow-files-under {folder}: no such folder (give a folder that exists)")
            resolved.append(Path(os.path.realpath(folder)))
        return cls(frozenset(properties), tuple(resolved))

    def check(self, workload: Workload, security: dict[str, str]) -> None:
        """Refuse (one line naming the property, and how the operator allows it) the first client
        property of the run that needs a permission this agent's operator did not give."""
        for where, properties in _property_sets(workload, security):
            for name, value in properties.items():
                if problem := self.problem(name, property_text(value)):
                    raise DimsterError(f"{where}.{name} {problem}")
        for role, library_name in run_libraries(workload).items():
            properties = {**role_properties(workload, role), **library(library_name).client_security(security)}
            names = MECHANISM_NAMES[library_name]
            protocol = property_text(properties.get("security.protocol", "")).lower()
            if protocol.startswith("sasl") and not any(properties.get(n) for n in names) and not self._allows(names):
                raise DimsterError(
                    f"kafkaConfig.{ROLE_SECTIONS[role]}: security.protocol {protocol} without {names[0]} means "
                    f"Kerberos (GSSAPI), which runs kinit on the agent's host: refused (set {names[0]} to one of "
                    f"{', '.join(MECHANISMS)}; or the agent's operator allows it: --allow-property {names[0]})"
                )

    def problem(self, name: str, value: str) -> str | None:
        """Why the property may not have this value here (the rest of a refusal line), or None."""
        does = restriction(name)
        if does is None or name in self.properties or value == "":
            return None
        harmless = HARMLESS.get(name)
        if harmless and all(item.strip() in harmless for item in value.split(",")):
            return None
        allow = f"--allow-property {name}"
        what = does
        if name == "sasl.jaas.config":
            if (jaas := jaas_problem(value)) is None:
                return None
            what = jaas
        elif does == FILE or (does == URL and urlsplit(value).scheme == "file"):
            path = url2pathname(urlsplit(value).path) if does == URL else value
            if any(Path(os.path.realpath(path)).is_relative_to(folder) for folder in self.folders):
                return None
            folders = ", ".join(map(str, self.folders)) or "none"
            what = f"reads the file {path} on the agent's host, outside the folders it allows files under ({folders})"
            allow = f"--allow-files-under DIR, or {allow}"
        elif harmless:
            what = f"{value} {does} (without permission: {', '.join(harmless[:6])})"
        return f"{what}: refused (the agent's operator allows it: {allow})"

    def _allows(self, names: Iterable[str]) -> bool:
        return any(name in self.properties for name in names)


def _property_sets(workload: Workload, security: dict[str, str]) -> Iterator[tuple[str, dict]]:
    """(where, properties): every section of the workload that becomes client properties, and the
    cluster's security as each of the run's libraries receives it."""
    sections = workload.kafka_config.model_dump(by_alias=True)
    for section in ("commonConfig", *ROLE_SECTIONS.values()):
        yield f"kafkaConfig.{section}", sections[section]
    for library_name in dict.fromkeys(run_libraries(workload).values()):
        try:
            yield f"clientSecurity ({library_name})", library(library_name).client_security(security)
        except KeyError as e:
            raise DimsterError(f"clientSecurity has no {e} (it is not a cluster's client security)") from None
