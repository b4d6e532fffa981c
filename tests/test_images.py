"""dimster's own images (dimster-base, dimster-kafka, dimster-worker), built for real once per session
in a private podman service, and run: Java and Kafka's scripts in the Kafka image, a Kafka node started
as the docker backend starts it, dimster's agent in the worker image; a second build is skipped; no
daemon is one error line."""

import re
import time

import docker
import pytest

from dimster import __version__
from dimster.containers import images
from dimster.containers.daemon import LABEL, connect
from dimster.errors import DimsterError
from tests import containers
from tests.conftest import dimster

pytestmark = pytest.mark.kafka
# the session's private podman service and dimster's images in it (bound here, pytest finds them)
podman_service = containers.podman_service
dimster_images = containers.dimster_images

SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
controller.listener.names=CONTROLLER
log.dirs=/var/lib/kafka/data
offsets.topic.replication.factor=1
"""
# How the docker backend starts a node: format (once) and the server, with Kafka's script names, so
# that the same works with the official apache/kafka image.
START_NODE = (
    "mkdir -p /etc/kafka/dimster && printf '%s' \"$SERVER_PROPERTIES\" > /etc/kafka/dimster/server.properties && "
    '/opt/kafka/bin/kafka-storage.sh format --ignore-formatted -t "$(/opt/kafka/bin/kafka-storage.sh random-uuid)" '
    "-c /etc/kafka/dimster/server.properties && "
    "exec /opt/kafka/bin/kafka-server-start.sh /etc/kafka/dimster/server.properties"
)


def run(client: docker.DockerClient, image: str, command: list[str], entrypoint: list[str] | None = None) -> str:
    """Run `command` in a container of `image` to its end; its output (stdout and stderr)."""
    container = client.containers.run(image, command, entrypoint=entrypoint, detach=True)
    try:
        status = container.wait(timeout=120)["StatusCode"]
        output = container.logs(stdout=True, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)
    assert status == 0, f"{command} in {image} exited with {status}:\n{output}"
    return output


def test_the_kafka_image_runs_java_17_and_kafkas_storage_tool(podman_service, dimster_images):
    output = run(
        podman_service.client,
        dimster_images.kafka,
        ["-c", "java -version 2>&1 && /opt/kafka/bin/kafka-storage.sh random-uuid && ls /var/lib/kafka/data | wc -l"],
        entrypoint=["sh"],
    )
    assert 'version "17.' in output
    uuid, entries = output.strip().splitlines()[-2:]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", uuid), output  # a Kafka cluster id, nothing else on stdout
    assert entries == "0", "the data folder must be empty"


def test_a_kafka_node_starts_from_the_kafka_image_as_the_docker_backend_starts_it(podman_service, dimster_images):
    container = podman_service.client.containers.run(
        dimster_images.kafka,
        ["-c", START_NODE],
        entrypoint=["sh"],
        environment={
            "SERVER_PROPERTIES": SERVER_PROPERTIES,
            "KAFKA_HEAP_OPTS": "-Xmx300m -Xms300m",
            "KAFKA_OPTS": "-Ddimster.test=yes",
        },
        detach=True,
    )
    try:
        deadline = time.monotonic() + 90
        logs = ""
        while time.monotonic() < deadline and "Kafka Server started" not in logs:
            container.reload()
            assert container.status == "running", container.logs().decode(errors="replace")[-3000:]
            time.sleep(0.5)
            logs = container.logs(stdout=True, stderr=False).decode(errors="replace")
        assert "Kafka Server started" in logs, logs[-3000:]  # the broker's log goes to stdout
        assert re.search(r"^\[\d{4}-\d\d-\d\d [\d:,]+\] INFO ", logs, re.MULTILINE), logs[:2000]
        code, cmdline = container.exec_run(["cat", "/proc/1/cmdline"])
        arguments = cmdline.decode().split("\0")
        assert code == 0 and "kafka.Kafka" in arguments, arguments
        assert {"-Xmx300m", "-Xms300m", "-Ddimster.test=yes"} <= set(arguments), arguments
        assert "-Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties" in arguments, arguments
        assert "/opt/kafka/libs/*" in arguments, arguments
        code, meta = container.exec_run(["cat", "/var/lib/kafka/data/meta.properties"])
        assert code == 0 and b"node.id=1" in meta, meta
    finally:
        container.remove(force=True)


def test_the_worker_image_runs_dimster_and_its_agent_without_javac(podman_service, dimster_images):
    client = podman_service.client
    assert run(client, dimster_images.worker, ["--version"]).strip() == f"dimster {__version__}"
    check = (
        "import importlib.util, shutil, jpype, dimster.remote.agent\n"
        "from dimster.clients.jvm import start_jvm\n"
        f"start_jvm('{dimster_images.kafka_version}')\n"  # the cached helper classes, found current
        "print(jpype.JClass('DimsterKafkaTool'), jpype.JClass('org.apache.kafka.clients.admin.Admin'))\n"
        "print('javac:', shutil.which('javac'), 'pyspark:', importlib.util.find_spec('pyspark'))\n"
    )
    output = run(client, dimster_images.worker, ["-c", check], entrypoint=["python3"])
    assert "<java class 'DimsterKafkaTool'>" in output, output
    assert "javac: None pyspark: None" in output, output


def test_a_worker_container_serves_coordinators(podman_service, dimster_images):
    token = "t" * 32
    container = podman_service.client.containers.run(
        dimster_images.worker,
        ["worker", "serve", "--listen", "0.0.0.0:7000"],
        environment={"DIMSTER_WORKER_TOKEN": token},
        ports={"7000/tcp": ("127.0.0.1", None)},
        detach=True,
    )
    try:
        container.reload()
        port = container.ports["7000/tcp"][0]["HostPort"]
        deadline = time.monotonic() + 30
        while True:
            result = dimster("worker", "status", f"127.0.0.1:{port}", "--json", env={"DIMSTER_WORKER_TOKEN": token})
            if result.code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert result.code == 0, result.stderr + container.logs().decode(errors="replace")
        assert f'"dimster": "{__version__}"' in result.stdout and '"busy": false' in result.stdout, result.stdout
    finally:
        container.remove(force=True)


def test_a_second_build_is_skipped(podman_service, dimster_images):
    client = podman_service.client
    before = {ref: client.images.get(ref).id for ref in (dimster_images.kafka, dimster_images.worker)}
    said = []
    started = time.monotonic()
    assert images.worker_image(client, dimster_images.kafka_version, said.append) == dimster_images.worker
    assert time.monotonic() - started < 15
    assert not [line for line in said if "build" in line], said
    assert {ref: client.images.get(ref).id for ref in before} == before
    for ref in (dimster_images.base, dimster_images.kafka, dimster_images.worker):
        image_labels = client.images.get(ref).labels
        assert image_labels[LABEL] == "1" and len(image_labels[images.STAMP_LABEL]) == 64, image_labels

    # the CLI says the same, and lists them
    result = dimster("image", "build", "--docker-host", podman_service.url, "--json")
    assert result.code == 0, result.stderr
    assert "building" not in result.stderr, result.stderr
    assert dimster_images.worker in result.stdout
    listed = dimster("image", "list", "--docker-host", podman_service.url)
    assert listed.code == 0, listed.stderr
    for ref in (dimster_images.base, dimster_images.kafka, dimster_images.worker):
        assert ref in listed.stdout, listed.stdout


def test_no_daemon_is_one_error_line(tmp_path):
    address = f"unix://{tmp_path}/none.sock"
    result = dimster("image", "build", "--docker-host", address)
    assert result.code != 0
    assert len(result.error_lines) == 1, result.stderr
    assert result.error_lines[0].startswith(f"dimster: error: no Docker daemon answers at {address} ("), result.stderr
    assert "DOCKER_HOST" in result.error_lines[0]
    assert "Traceback" not in result.stderr
    with pytest.raises(DimsterError, match="connection refused"):
        connect("tcp://127.0.0.1:1")
