"""The archive of a `docker` node's files, which dimster uploads into its container before it starts."""

import io
import tarfile

import pytest

from dimster.cluster.docker import DockerCluster
from dimster.cluster.docker_nodes import CONFIG_DIR
from dimster.environment import load_environment

pytestmark = pytest.mark.unit


def test_the_node_archive_ends_at_its_end_of_archive_blocks(tmp_path, monkeypatch):
    """Nothing after the two zero blocks: podman stops reading there, and an upload that goes on
    (tarfile pads to a 10 kB record) can fail with a broken pipe (containers/buildah#6573)."""
    monkeypatch.setenv("DIMSTER_STATE_DIR", str(tmp_path))  # the node's server.properties goes there
    cluster = DockerCluster(load_environment("dockerBeefy"))
    cluster.write_configs({"num.partitions": "1"})
    archive = cluster._files(0)
    assert len(archive) % tarfile.BLOCKSIZE == 0
    assert archive[-2 * tarfile.BLOCKSIZE :] == bytes(2 * tarfile.BLOCKSIZE)
    assert any(archive[-3 * tarfile.BLOCKSIZE : -2 * tarfile.BLOCKSIZE])  # the last member's data
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = tar.getnames()
    assert f"{CONFIG_DIR.lstrip('/')}/server.properties" in names
