"""The `external` backend: a cluster someone else runs; dimster only connects to it."""

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from dimster.clock import Deadline
from dimster.cluster.backend import BackendPlug, ClusterStatus, NodeStatus, RedeployReport
from dimster.errors import ClusterError, DimsterError
from dimster.kafka.admin import registered_brokers
from dimster.kubernetes.deployment import KubernetesDeploy
from dimster.profile import ProfileBase

REACH_TIMEOUT = 10.0
REFUSED_PATIENCE = 2.0  # every bootstrap address refusing TCP this long: nothing listens there


def _refuses(address: str) -> bool:
    """True when `host:port` answers a TCP connect with a refusal (nothing listens), not a time-out."""
    host, _, port = address.strip().rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=1.0).close()
    except ConnectionRefusedError:
        return True
    except (OSError, ValueError):
        pass  # unresolvable, unroutable or slow: librdkafka's own wait decides
    return False


class ExternalProfile(ProfileBase):
    """The `external` backend: a cluster someone else runs; its brokers are read from it."""

    backend: Literal["external"] = "external"
    external_bootstrap: str | None = Field(None, alias="bootstrapServers", min_length=3)
    kubernetes: KubernetesDeploy | None = None  # the agents and coordinator as pods (`dimster k8s render`)

    @model_validator(mode="after")
    def _needs_bootstrap(self):
        if not self.external_bootstrap:
            raise ValueError("backend: external needs bootstrapServers (host:port[,host:port...])")
        return self

    @property
    def bootstrap_servers(self) -> str:
        return self.external_bootstrap or ""


class ExternalCluster:
    def __init__(self, profile: ExternalProfile):
        self.profile = profile

    def _brokers(self, patience: float = 0.0) -> set[int]:
        deadline = Deadline(patience)
        while True:
            brokers = registered_brokers(self.profile.bootstrap_servers, timeout=3.0)
            if brokers or deadline.passed():
                return brokers

    def _refused_throughout(self) -> bool:
        """Every bootstrap address refused the connection for REFUSED_PATIENCE: no need to wait longer."""
        addresses = self.profile.bootstrap_servers.split(",")
        deadline = Deadline(REFUSED_PATIENCE)
        while all(_refuses(address) for address in addresses):
            if deadline.passed():
                return True
            time.sleep(0.2)
        return False

    def up(self, progress=print) -> ClusterStatus:
        if self._refused_throughout():
            raise ClusterError(
                f"cluster at {self.profile.bootstrap_servers} is unreachable: every address refused the connection "
                f"for {REFUSED_PATIENCE:.0f}s, nothing listens there "
                f"(check bootstrapServers in run/environments/{self.profile.name}.yaml)"
            )
        status = self._status(self._brokers(REACH_TIMEOUT))
        if not status.healthy:
            raise ClusterError(
                f"cluster at {self.profile.bootstrap_servers} is unreachable: no broker answered within "
                f"{REACH_TIMEOUT:.0f}s (check bootstrapServers in run/environments/{self.profile.name}.yaml)"
            )
        progress(f"'{self.profile.name}' is an external cluster of {len(status.nodes)} broker(s): connected")
        return status

    def client_security(self) -> dict[str, str]:
        return {}  # PLAINTEXT: an external profile has no security key yet

    def down(self, progress=print) -> list[int]:
        progress(f"'{self.profile.name}' is an external cluster: dimster does not stop it")
        return []

    def ensure(self, progress=print) -> None:
        self.up(progress)

    def fault(self, node_id: int, action: str, progress) -> str:
        raise DimsterError(
            f"'{self.profile.name}' is an external cluster: dimster kills, pauses and restarts only nodes it runs"
        )

    def status(self) -> ClusterStatus:
        return self._status(self._brokers())

    def _status(self, brokers: set[int]) -> ClusterStatus:
        nodes = [NodeStatus(b, None, True, True, 0, 0, "") for b in sorted(brokers)]
        return ClusterStatus(
            self.profile.name,
            "external",
            self.profile.kafka_version,
            self.profile.bootstrap_servers,
            bool(brokers),
            bool(brokers),
            nodes,
        )

    def redeploy(self, progress=print) -> RedeployReport:
        raise self._not_ours()

    def _not_ours(self) -> DimsterError:
        return DimsterError(f"'{self.profile.name}' is an external cluster: change its broker config where it runs")

    def log_files(self) -> dict[int, Path]:
        return {}

    def log_lines(self, lines: int) -> dict[int, list[str]]:
        return {}

    def follow_logs(self, node_ids: list[int]) -> Iterator[tuple[int, str]]:
        return iter(())

    def broker_config(self) -> dict[str, str]:
        return {}

    def check_broker_config(self) -> dict[str, str]:
        raise self._not_ours()  # a broker config for an external cluster is refused, as its redeploy is

    def check_running_config(self, progress=print) -> None:
        pass  # dimster knows no broker config of an external cluster

    def remove_data(self) -> None:
        raise DimsterError(f"'{self.profile.name}' is an external cluster: dimster keeps no data for it")


PLUG = BackendPlug(ExternalProfile, ExternalCluster)
