"""dimster: load-test Apache Kafka, above all its share groups."""

__version__ = "0.1.0"
