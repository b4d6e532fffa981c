"""The suite's port search passes over host ports the firewall forwards to containers (tests/netns.py):
a killed session's podman rules outlive it, and a cluster on those ports would talk to containers
that are gone (a fresh clone of 23f1e36: a docker redeploy whose new containers nothing reached)."""

import pytest

from tests.netns import destination_ports

pytestmark = pytest.mark.unit

NFT = """table ip nat {
	chain NETAVARK-HOSTPORT-DNAT {
		tcp dport 23540  counter packets 2968 bytes 178080 jump NETAVARK-DN-6A0B21289C9AE
		tcp dport 23560  counter packets 40 bytes 2400 jump NETAVARK-DN-6A0B21289C9AE
		udp dport { 5353, 8000-8002 } counter packets 0 bytes 0 jump NETAVARK-DN-E713DFBB7B2BD
	}
}
"""
IPTABLES = """-N NETAVARK-HOSTPORT-DNAT
-A NETAVARK-HOSTPORT-DNAT -p tcp -m tcp --dport 24100 -j NETAVARK-DN-1D8B
-A NETAVARK-HOSTPORT-DNAT -p tcp -m multiport --dports 100:102,443 -j NETAVARK-DN-1D8B
"""


def test_the_ports_of_nftables_and_iptables_rules_single_ranges_and_sets():
    assert destination_ports(NFT) == {23540, 23560, 5353, 8000, 8001, 8002}
    assert destination_ports(IPTABLES) == {24100, 100, 101, 102, 443}
    assert destination_ports("") == set()
