"""The private network of a local cluster with `nodeNetwork`: each node in a network namespace of its
own, on a veth pair into a bridge that holds this host's address of the subnet, so that clients here
reach every node while a node can be cut off from the others (`isolate`) or from everyone
(`isolate-all`) with blackhole routes inside the namespaces, and joined again (`rejoin`).

Needs root, as network namespaces do. Everything is named after a tag of the cluster's folder, so two
clusters (a user's and a test's) never share a bridge or a namespace; `remove` takes it all away."""

import hashlib
import ipaddress
import os
import subprocess
from pathlib import Path

from dimster.errors import ClusterError, DimsterError


def subnet_addresses(subnet: str, nodes: int) -> tuple[str, list[str]]:
    """(this host's address on the bridge, each node's address): the first hosts of `subnet`, in order."""
    hosts = ipaddress.ip_network(subnet).hosts()
    bridge = str(next(hosts))
    return bridge, [str(next(hosts)) for _ in range(nodes)]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise DimsterError("nodeNetwork needs the `ip` command (Debian: apt-get install iproute2)") from None
    if check and result.returncode != 0:
        raise ClusterError(f"ip {' '.join(args)} failed: {result.stderr.strip() or result.stdout.strip()}")
    return result


class NodeNetwork:
    def __init__(self, subnet: str, cluster_dir: Path, node_ids: list[int]):
        self.subnet = ipaddress.ip_network(subnet)
        self.node_ids = node_ids
        self.bridge_address, self.addresses = subnet_addresses(subnet, len(node_ids))
        self.tag = hashlib.sha1(str(cluster_dir.resolve()).encode()).hexdigest()[:7]
        self.bridge = f"dmc{self.tag}"  # interface names have at most 15 characters

    def namespace(self, index: int) -> str:
        return f"dimster-{self.tag}-{self.node_ids[index]}"

    def command(self, index: int, command: list[str]) -> list[str]:
        """`command` as run inside node `index`'s namespace (`ip netns exec` execs it: same PID)."""
        return ["ip", "netns", "exec", self.namespace(index), *command]

    # ---- create and remove ------------------------------------------------------------------------
    def create(self) -> None:
        """The bridge and each node's namespace; what exists already is kept (a node started again)."""
        if os.geteuid() != 0:
            raise DimsterError("nodeNetwork puts each node in a network namespace of its own, which needs root")
        if not self._exists("link", "show", self.bridge):
            self._check_subnet_unused()
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.bridge_address}/{self.subnet.prefixlen}", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        for index in range(len(self.node_ids)):
            if not self._exists("netns", "pids", self.namespace(index)):
                self._add_namespace(index)

    def _add_namespace(self, index: int) -> None:
        namespace, outside, inside = self.namespace(index), f"dmh{self.tag}{index}", f"dmn{self.tag}{index}"
        _ip("link", "del", outside, check=False)  # a leftover of a namespace deleted by hand
        _ip("netns", "add", namespace)
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", namespace)
        _ip("link", "set", outside, "master", self.bridge)
        _ip("link", "set", outside, "up")
        _ip("-n", namespace, "addr", "add", f"{self.addresses[index]}/{self.subnet.prefixlen}", "dev", inside)
        _ip("-n", namespace, "link", "set", inside, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")

    def remove(self) -> None:
        """The namespaces (each takes its veth pair along) and the bridge; quiet about what is gone."""
        for index in range(len(self.node_ids)):
            _ip("netns", "del", self.namespace(index), check=False)
        _ip("link", "del", self.bridge, check=False)

    def _exists(self, *args: str) -> bool:
        return _ip(*args, check=False).returncode == 0

    def _check_subnet_unused(self) -> None:
        for line in _ip("-4", "-o", "addr").stdout.splitlines():
            for word in line.split():
                if "/" in word and ipaddress.ip_interface(word).network.overlaps(self.subnet):
                    raise ClusterError(
                        f"nodeNetwork {self.subnet} overlaps {word} of interface {line.split()[1]}: "
                        "pick a private subnet nothing on this host uses"
                    )

    # ---- isolation ----------------------------------------------------------------------------------
    def apply_isolation(self, isolated: dict[int, str]) -> None:
        """Make the routes say `isolated` (node id -> `nodes`, cut off from the other nodes, or `all`,
        from this host's clients too): in each namespace, a blackhole route to every node it must not
        reach, so packets both ways are dropped and the nodes see a partition, not a refusal."""
        for index, node_id in enumerate(self.node_ids):
            namespace = self.namespace(index)
            _ip("-n", namespace, "route", "flush", "type", "blackhole")
            cut_off = set()
            for other, address in zip(self.node_ids, self.addresses, strict=True):
                if other != node_id and (node_id in isolated or other in isolated):
                    cut_off.add(address)
            if isolated.get(node_id) == "all":
                cut_off.add(self.bridge_address)
            for address in sorted(cut_off):
                _ip("-n", namespace, "route", "add", "blackhole", f"{address}/32")
