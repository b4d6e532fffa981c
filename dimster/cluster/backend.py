"""What every cluster backend offers (cluster/backends.py picks the one an environment names), and
what a backend's module hands the registry: its profile model and its class."""

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from dimster.profile import ProfileBase


@dataclass
class NodeStatus:
    node_id: int
    pid: int | None
    alive: bool
    registered: bool
    broker_port: int
    controller_port: int
    log_file: str
    paused: bool = False  # stopped by `dimster cluster pause`
    isolated: str | None = None  # cut off by `dimster cluster isolate`: from `nodes`, or from `all`
    kafka_version: str | None = None  # the version it runs, when the backend knows (upgrades roll node by node)


@dataclass
class ClusterStatus:
    environment: str
    backend: str
    kafka_version: str
    bootstrap_servers: str
    running: bool
    healthy: bool
    nodes: list[NodeStatus] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class RedeployReport:
    dynamic: dict[str, str | None]  # applied through the Admin API (None: reset to default)
    restarted: dict[str, str | None]  # needed a restart of every node
    restarted_nodes: list[int]


class ClusterBackend(Protocol):
    @property
    def profile(self) -> ProfileBase: ...  # its backend's own profile model (read-only here: each narrows it)

    def up(self, progress=print) -> ClusterStatus: ...
    def ensure(self, progress=print) -> None: ...  # up, or redeploy what differs from the profile
    def down(self, progress=print) -> list[int]: ...
    def status(self) -> ClusterStatus: ...
    def redeploy(self, progress=print) -> RedeployReport: ...
    def log_files(self) -> dict[int, Path]: ...  # each node's log as a file (a run's bundle copies them)
    def log_lines(self, lines: int) -> dict[int, list[str]]: ...  # the last lines of each node's log
    def follow_logs(self, node_ids: list[int]) -> Iterator[tuple[int, str]]: ...  # new lines as they come
    def broker_config(self) -> dict[str, str]: ...
    def check_broker_config(self) -> dict[str, str]: ...  # the profile's broker config, checked; starts nothing
    def check_running_config(self, progress=print) -> None: ...  # a bad profile config raises; a new one is named
    def fault(self, node_id: int, action: str, progress) -> str: ...  # kill, pause, isolate... a node
    def client_security(self) -> dict[str, str]: ...  # what clients need beside bootstrap.servers (kafka/security.py)
    def remove_data(self) -> None: ...  # the cluster's data and logs, when nothing runs (`cluster down --purge`)


def merged_lines(sources: dict[int, Iterable[str]]) -> Iterator[tuple[int, str]]:
    """(node id, line) of every node's log lines as they come, each read on a thread of its own, until
    every source ended (`follow_logs`: a source ends where its node's log stream does)."""
    lines: queue.Queue[tuple[int, str] | None] = queue.Queue()  # None: a source ended

    def pump(node_id: int, source: Iterable[str]) -> None:
        try:
            for line in source:
                lines.put((node_id, line))
        finally:
            lines.put(None)

    for node_id, source in sources.items():
        threading.Thread(target=pump, args=(node_id, source), daemon=True).start()
    streaming = len(sources)
    while streaming:
        item = lines.get()
        if item is None:
            streaming -= 1
        else:
            yield item


@dataclass(frozen=True)
class BackendPlug:
    """A backend as its module declares it (`PLUG = BackendPlug(MyProfile, MyCluster)`): the model of
    its profile (a ProfileBase with its own keys) and the class that runs a cluster of that profile."""

    profile: type[ProfileBase]
    cluster: Callable[..., ClusterBackend]  # called with a profile of `profile`
