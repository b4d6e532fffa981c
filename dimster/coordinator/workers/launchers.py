"""How a run's workers start, by the form of the environment's `workers:` key. A new way to start
workers is one module (its form's model among profile.ProfileBase's `workers`, and a launcher class
offering `Launcher`, next to its `Workers` implementation) and one line in LAUNCHERS."""

from collections.abc import Callable
from typing import Protocol

from dimster.cluster.backend import ClusterBackend
from dimster.coordinator.workers.containers import ContainerLauncher
from dimster.coordinator.workers.local import LocalLauncher
from dimster.coordinator.workers.remote import AgentLauncher
from dimster.coordinator.workers.seam import Workers
from dimster.profile import ProfileBase
from dimster.results.bundle import ResultsBundle


class Launcher(Protocol):
    """One run's workers, from before the cluster is up to after the run."""

    count: int  # how many workers the profile gives the run

    @property
    def client_bootstrap(self) -> str | None: ...  # what the workers' clients connect to, when not this host's

    def __init__(self, profile: ProfileBase, progress: Callable[[str], None]) -> None: ...
    @staticmethod
    def takes(workers: object) -> bool: ...  # whether `workers:` has this launcher's form
    def check_client_versions(self, versions: dict[str, str]) -> None: ...  # one line when they cannot run
    def connect(self, run_name: str) -> None: ...  # before the cluster: what must answer first
    def start(self, cluster: ClusterBackend, run_name: str) -> None: ...  # once the cluster is up
    def workers(self, bundle: ResultsBundle) -> tuple[Workers, int]: ...  # the run's Workers, their capacity
    def close(self) -> None: ...  # after the run, also one that failed to start


LAUNCHERS: list[type[Launcher]] = [LocalLauncher, AgentLauncher, ContainerLauncher]


def workers_for(profile: ProfileBase, progress: Callable[[str], None] = print) -> Launcher:
    """The launcher of the profile's `workers:` form; nothing starts until its `connect` and `start`."""
    launcher = next(launcher for launcher in LAUNCHERS if launcher.takes(profile.workers))
    return launcher(profile, progress)
