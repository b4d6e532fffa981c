# ruff: noqa: E501 (Kafka log lines, as Kafka wrote them)
"""What dimster says when a node container of the `docker` backend stops: the errors of its log, not
its last lines of shutdown, and the network's DNS when the node could not resolve the others. The log
text is Kafka 4.3.1's, as a node whose peers' names did not resolve wrote it."""

import pytest

from dimster.cluster.docker import DockerCluster
from dimster.environment import load_environment

pytestmark = pytest.mark.unit

UNRESOLVED_PEERS = """\
[2026-11-25 10:14:50,898] INFO Registered signal handlers for TERM, INT, HUP (org.apache.kafka.common.utils.LoggingSignalHandler)
[2026-11-25 10:14:54,262] WARN [RaftManager id=1] Error connecting to node dimster-dockerBeefy-node-3:9093 (id: 3 rack: null isFenced: false) (org.apache.kafka.clients.NetworkClient)
java.net.UnknownHostException: dimster-dockerBeefy-node-3: Name or service not known
[2026-11-25 10:14:59,395] WARN [RaftManager id=1] Error connecting to node dimster-dockerBeefy-node-2:9093 (id: 2 rack: null isFenced: false) (org.apache.kafka.clients.NetworkClient)
java.net.UnknownHostException: dimster-dockerBeefy-node-2
java.net.UnknownHostException: archive.example
[2026-11-25 10:15:55,847] ERROR [BrokerLifecycleManager id=1] Shutting down because we were unable to register with the controller quorum. (org.apache.kafka.server.BrokerLifecycleManager)
[2026-11-25 10:15:55,851] ERROR [BrokerServer id=1] Fatal error during broker startup. Prepare to shutdown (kafka.server.BrokerServer)
""" + "".join(
    f"[2026-11-25 10:16:0{i % 10},000] INFO [SharedServer id=1] Stopping SharedServer (kafka.server.SharedServer)\n"
    for i in range(50)
)


class LoggedContainer:
    """A stopped container as far as the function under test reads it: its log."""

    def __init__(self, text: str):
        self.text = text

    def logs(self, tail="all") -> bytes:
        lines = self.text.splitlines(keepends=True)
        return "".join(lines if tail == "all" else lines[-tail:]).encode()


def test_a_node_that_could_not_resolve_its_peers_names_the_network_dns():
    cluster = DockerCluster(load_environment("dockerBeefy"))
    detail = cluster._why_stopped(LoggedContainer(UNRESOLVED_PEERS)).splitlines()
    assert detail[:2] == [line for line in UNRESOLVED_PEERS.splitlines() if " ERROR " in line]
    assert detail[2].startswith(
        "the node could not resolve dimster-dockerBeefy-node-2, dimster-dockerBeefy-node-3: the daemon's DNS "
        "on network dimster-dockerBeefy does not answer"
    )
    assert len(detail) == 3


def test_a_node_without_errors_shows_its_last_lines():
    cluster = DockerCluster(load_environment("dockerBeefy"))
    lines = [f"[2026-11-25 10:16:00,000] INFO line {i} (kafka.Kafka)" for i in range(30)]
    assert cluster._why_stopped(LoggedContainer("\n".join(lines))).splitlines() == lines[-12:]
