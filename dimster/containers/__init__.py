"""Containers through a Docker-compatible daemon (Docker, or podman's Docker API): the connection,
and the images dimster builds itself when none can be pulled (base, Kafka, worker)."""
