"""Workers as processes of this host (the default), each on a pipe; `RemoteWorkers`
(coordinator/workers/remote.py) runs them on `dimster worker serve` agents."""

import contextlib
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for_connections
from multiprocessing.process import BaseProcess
from pathlib import Path

from dimster.cluster.backend import ClusterBackend
from dimster.coordinator.workers.seam import WorkerLost, Workers
from dimster.profile import ProfileBase
from dimster.results.bundle import ResultsBundle
from dimster.results.records import ClockOffset
from dimster.worker.process import PipeChannel, start_worker, start_worker_server
from dimster.worker.protocol import Assignment, Closed, Message


class LocalWorkers:
    """Worker processes of this host, each on a pipe. Same host, same clock: no offset to estimate."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.processes: list[BaseProcess] = []
        self.channels: list[PipeChannel] = []
        self.gone: set[int] = set()

    def start(self, assignments: list[Assignment]) -> None:
        for assignment in assignments:
            assignment.log_file = str(self.log_dir / f"worker-{assignment.worker_index}.log")
            process, ours = start_worker(assignment, f"dimster-worker-{assignment.worker_index}")
            self.processes.append(process)
            self.channels.append(PipeChannel(ours))

    def send(self, index: int, message: Message) -> None:
        if index not in self.gone:
            with contextlib.suppress(OSError):  # the process died: receive() reports it
                self.channels[index].send(message)

    def receive(self, timeout: float, doorbell: int | None = None) -> list[tuple[int, Message | WorkerLost]]:
        live = {self.channels[i].connection: i for i in range(len(self.channels)) if i not in self.gone}
        received: list[tuple[int, Message | WorkerLost]] = []
        bell = [] if doorbell is None else [doorbell]
        for connection in wait_for_connections([*live, *bell], timeout=timeout):
            if connection == doorbell:
                continue
            assert isinstance(connection, Connection)  # wait() returns some of the objects it was given
            received += self._read(live[connection], until_empty=False)
        for index, process in enumerate(self.processes):
            if index not in self.gone and not process.is_alive():
                received += self._read(index, until_empty=True)  # what it wrote before it exited
                if index not in self.gone:
                    received.append((index, self._lost(index)))
        return received

    def _read(self, index: int, until_empty: bool) -> list[tuple[int, Message | WorkerLost]]:
        """One message of worker `index` (or all it has written, for an exited one); a Closed among
        them means its process ends, which is no loss; a broken pipe of a live worker is one."""
        channel, messages = self.channels[index], []
        while index not in self.gone and (not until_empty or channel.poll(0)):
            try:
                message = channel.recv()
            except (EOFError, OSError):
                if not until_empty:
                    messages.append((index, self._lost(index)))
                break
            messages.append((index, message))
            if isinstance(message, Closed):
                self.gone.add(index)
            if not until_empty:
                break
        return messages

    def _lost(self, index: int) -> WorkerLost:
        self.gone.add(index)
        process = self.processes[index]
        process.join(1)
        if process.is_alive():  # its channel broke first: it is lost all the same, and stopped now
            process.kill()
            process.join(5)
        return WorkerLost(f"worker {index} (pid {process.pid}) exited with code {process.exitcode}", time.time())

    def close(self) -> list[str]:
        killed = []
        for index, process in enumerate(self.processes):
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)
                killed.append(f"worker {index} (pid {process.pid})")
        return killed

    def describe(self) -> list[dict]:
        return [
            {"index": i, "host": "local", "pid": p.pid, "alive": i not in self.gone and p.is_alive()}
            for i, p in enumerate(self.processes)
        ]

    def clock_offsets(self) -> dict[int, ClockOffset]:
        return {}


class LocalLauncher:
    """`workers: N`: N worker processes of this host, started by the run."""

    client_bootstrap = None

    def __init__(self, profile: ProfileBase, progress: Callable[[str], None] = print):
        assert isinstance(profile.workers, int)
        self.count = profile.workers

    @staticmethod
    def takes(workers: object) -> bool:
        return isinstance(workers, int)

    def check_client_versions(self, versions: dict[str, str]) -> None:
        pass  # a JVM per worker: any version

    def connect(self, run_name: str) -> None:
        pass

    def start(self, cluster: ClusterBackend, run_name: str) -> None:
        start_worker_server()  # its imports run while the run makes its topics

    def workers(self, bundle: ResultsBundle) -> tuple[Workers, int]:
        return LocalWorkers(bundle.path / "logs"), self.count

    def close(self) -> None:
        pass  # the run closes its processes (LocalWorkers.close)
