"""A cluster's client security in both libraries' words. Profiles and clusters give it in librdkafka's
names (`security.protocol`, `sasl.mechanisms`, `sasl.username`, `sasl.password`, `ssl.ca.pem`);
Kafka's Java clients (the workers' `clientLibrary: java`, dimster's Java helper) get Kafka's names.
A client library's plug (dimster/clients/) maps it to its clients' names."""

from collections.abc import Mapping

SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"

# A cluster's client security: librdkafka's properties beside bootstrap.servers; empty or None for PLAINTEXT
ClientSecurity = Mapping[str, str] | None


def java_security(security: ClientSecurity) -> dict[str, str]:
    """`security` (librdkafka's names) as Kafka's Java client properties."""
    if not security:
        return {}
    java = {"security.protocol": security["security.protocol"]}
    if "sasl.mechanisms" in security:
        user, password = (_jaas_quoted(security[k]) for k in ("sasl.username", "sasl.password"))
        java["sasl.mechanism"] = security["sasl.mechanisms"]
        java["sasl.jaas.config"] = f'{SCRAM_LOGIN} required username="{user}" password="{password}";'
    if "ssl.ca.pem" in security:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.certificates"] = security["ssl.ca.pem"]
    return java


def _jaas_quoted(value: str) -> str:
    """A value inside a JAAS option's double quotes (Kafka's JaasConfig reads backslash escapes)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')
