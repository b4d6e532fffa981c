"""The Kafka client libraries a workload's `clientLibrary` may name: the one registry of them.

Each is one module under dimster/clients/ that provides everything of its library (its drivers,
property check, security mapping and statistics; see `dimster.clients.LibraryPlug`), named here
by its dotted path: the workload validates the names without importing a library, and a library's
packages (confluent-kafka, JPype) are imported only where a run uses it."""

LIBRARIES: dict[str, str] = {
    "librdkafka": "dimster.clients.librdkafka",
    "java": "dimster.clients.java",
}
