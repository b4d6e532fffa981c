"""A private network of the test's own: a bridge on this host with an unused 10.x.y.0/24, and
network namespaces on veth pairs into it, each a "host" with its own address. Everything is removed
when the test is done, also when it fails. Needs root (CI and this machine have it)."""

import contextlib
import ipaddress
import os
import re
import subprocess
from dataclasses import dataclass


@dataclass
class PrivateNetwork:
    bridge_address: str  # this host's address on the network (the cluster listens here)
    hosts: list[tuple[str, str]]  # (namespace, address)


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def unused_subnet(skip: int = 0) -> ipaddress.IPv4Network:
    """A 10.x.y.0/24 no interface of this host is on; `skip` passes over that many such, so that
    two callers before either network exists get different ones."""
    taken = [ipaddress.ip_interface(word).network for word in ip("-4", "-o", "addr").stdout.split() if "/" in word]
    seed = os.getpid()
    for n in range(200):
        candidate = ipaddress.ip_network(f"10.{200 + (seed + n) % 50}.{(seed // 50 + n) % 250}.0/24")
        if not any(candidate.overlaps(t) for t in taken):
            if skip == 0:
                return candidate
            skip -= 1
    raise AssertionError("no unused 10.x.y.0/24 for the test network")


@contextlib.contextmanager
def private_network(hosts: int):
    tag = str(os.getpid() % 100000)
    subnet = unused_subnet()
    addresses = list(subnet.hosts())
    bridge = f"dmb{tag}"
    namespaces = [f"dimster-{tag}-{i}" for i in range(hosts)]
    try:
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", f"{addresses[0]}/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for i, namespace in enumerate(namespaces):
            outside, inside = f"dmh{tag}{i}", f"dmn{tag}{i}"
            ip("netns", "add", namespace)
            ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            ip("link", "set", inside, "netns", namespace)
            ip("link", "set", outside, "master", bridge)
            ip("link", "set", outside, "up")
            ip("-n", namespace, "addr", "add", f"{addresses[i + 1]}/24", "dev", inside)
            ip("-n", namespace, "link", "set", inside, "up")
            ip("-n", namespace, "link", "set", "lo", "up")
        yield PrivateNetwork(str(addresses[0]), [(ns, str(addresses[i + 1])) for i, ns in enumerate(namespaces)])
    finally:
        for namespace in namespaces:
            ip("netns", "del", namespace, check=False)  # takes its end of the veth pair, and so both
        ip("link", "del", bridge, check=False)


def forwarded_ports() -> set[int]:
    """The host ports this host's firewall forwards to containers (podman's netavark, nftables or
    iptables). Nothing listens on them, so they bind as free; but a connection to one goes to the
    container its rule names. A session killed with containers up leaves its rules behind, and a
    later session's cluster on those ports would then talk to addresses that are gone."""
    ports: set[int] = set()
    commands = (
        ["nft", "list", "chain", "ip", "nat", "NETAVARK-HOSTPORT-DNAT"],
        ["iptables", "-t", "nat", "-S", "NETAVARK-HOSTPORT-DNAT"],
    )
    for command in commands:
        with contextlib.suppress(OSError):
            ports |= destination_ports(subprocess.run(command, capture_output=True, text=True).stdout)
    return ports


def destination_ports(rules: str) -> set[int]:
    """The destination ports firewall rules match, as `nft list` or `iptables -S` prints them: one
    port, a range (8000-8002, 8000:8002), a list (80,443) or an nftables set ({ 80, 443 })."""
    ports: set[int] = set()
    for match in re.finditer(r"dports?[\s=]+(\{[^}]*\}|[\d:,-]+)", rules):
        for low, high in re.findall(r"(\d+)(?:[:-](\d+))?", match.group(1)):
            ports.update(range(int(low), int(high or low) + 1))
    return ports
