"""`firstNodeId`: a local cluster whose node ids do not start at 1, and external profiles that take
their brokers from the cluster rather than from a local layout. No broker needed."""

import pytest
from pydantic import ValidationError

from dimster.cluster.local import LocalCluster
from dimster.environment import EnvironmentProfile, parse_profile

pytestmark = pytest.mark.unit


def profile(**keys) -> EnvironmentProfile:
    return parse_profile({"name": "ids", **keys})


def local(folder, **keys) -> LocalCluster:
    return LocalCluster(profile(dataDir=str(folder), **keys))


def test_node_ids_start_at_first_node_id_and_ports_follow_the_position(tmp_path):
    cluster = local(tmp_path, nodes=3, firstNodeId=4, brokerPortBase=24000, controllerPortBase=24010)
    properties = [cluster.node_properties(i, {}) for i in range(3)]
    assert [p["node.id"] for p in properties] == ["4", "5", "6"]
    voters = "4@127.0.0.1:24010,5@127.0.0.1:24011,6@127.0.0.1:24012"
    assert {p["controller.quorum.voters"] for p in properties} == {voters}
    assert properties[1]["listeners"] == "PLAINTEXT://127.0.0.1:24001,CONTROLLER://127.0.0.1:24011"
    assert list(cluster.log_files()) == [4, 5, 6]
    assert cluster.log_files()[5].parts[-3:] == ("node-5", "logs", "server.log")
    assert [n.node_id for n in cluster.status().nodes] == [4, 5, 6]  # not running: no broker asked


def test_node_ids_start_at_1_by_default(tmp_path):
    cluster = local(tmp_path, nodes=2)
    assert [cluster.node_properties(i, {})["node.id"] for i in range(2)] == ["1", "2"]
    assert list(cluster.log_files()) == [1, 2]


@pytest.mark.parametrize("key", ["nodes", "firstNodeId", "brokerPortBase", "heap"])
def test_an_external_profile_refuses_the_local_layout(key):
    value = {"nodes": 3, "firstNodeId": 4, "brokerPortBase": 24000, "heap": "2g"}[key]
    with pytest.raises(ValidationError, match=f"Value error, {key}: only for backend: local"):
        profile(backend="external", bootstrapServers="127.0.0.1:24000", **{key: value})


def test_a_negative_first_node_id_is_refused():
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        profile(firstNodeId=-1)
