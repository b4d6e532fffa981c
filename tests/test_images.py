"""dimster's own images (dimster-base, dimster-kafka, dimster-worker), built for real once per session
in a private podman service, and run: Java and Kafka's scripts in the Kafka image, run by appuser as in
apache/kafka; dimster's agent in the worker image; a second build is skipped; no daemon is one error
line. tests/test_docker_backend.py starts clusters and agent containers from them."""

import re

import docker
import pytest

from dimster import __version__
from dimster.containers import images
from dimster.containers.daemon import LABEL, connect
from dimster.errors import DimsterError
from tests.conftest import dimster

pytestmark = pytest.mark.kafka


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
        [
            "-c",
            "java -version 2>&1 && /opt/kafka/bin/kafka-storage.sh random-uuid && ls /var/lib/kafka/data | wc -l"
            " && id -un && stat -c %u /var/lib/kafka/data /opt/kafka/libs",
        ],
        entrypoint=["sh"],
    )
    assert 'version "17.' in output
    uuid, entries, user, data_owner, libs_owner = output.strip().splitlines()[-5:]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", uuid), output  # a Kafka cluster id, nothing else on stdout
    assert entries == "0", "the data folder must be empty"
    assert (user, data_owner, libs_owner) == ("appuser", "1000", "1000"), output  # as in apache/kafka


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


def test_a_second_build_is_skipped(podman_service, dimster_images):
    client = podman_service.client
    before = {ref: client.images.get(ref).id for ref in (dimster_images.kafka, dimster_images.worker)}
    said = []
    assert images.worker_image(client, dimster_images.kafka_version, said.append) == dimster_images.worker
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
