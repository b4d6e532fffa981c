"""A private podman service for the tests that need a Docker-compatible daemon, and dimster's images
built in it once per session.

tests/conftest.py imports both fixtures, so every test module may ask for them: the session has one
service and builds the images once.

The service has its own containers.conf, storage (--root, --runroot), temporary folder, network
configs and socket, all in a pytest temporary folder: it never sees the machine's own containers,
images or networks, nor they its. At the end of the session (failed or not) every container, volume
and network it has is removed, the service is stopped by its PID, and `podman system reset` leaves
no overlay mount nor conmon process behind. The podman CLI is used for that clean-up only."""

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors
import psutil
import pytest
import requests.exceptions

from dimster.containers import images
from dimster.environment import DEFAULT_KAFKA_VERSION

CONTAINERS_CONF = """\
[containers]
default_ulimits = []

[engine]
runtime = "runc"
tmp_dir = "{folder}/tmp"

[network]
network_config_dir = "{folder}/networks"
"""
DEFAULT_NETWORKS = {"bridge", "podman", "host", "none"}  # podman's own: not ours to remove
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
RESET_TRIES = 3  # `unlinkat .../tmp/events: directory not empty` was seen once; a second reset finishes it


@dataclass
class PodmanService:
    """A running `podman system service` of this session: `url` for DOCKER_HOST or a profile's
    dockerHost, `client` a Docker SDK client of it."""

    folder: Path
    process: subprocess.Popen
    url: str
    client: docker.DockerClient | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def environment(self) -> dict[str, str]:
        return {**os.environ, "CONTAINERS_CONF": str(self.folder / "containers.conf")}

    def podman(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """The podman CLI on this service's storage (for the clean-up only)."""
        storage = ["--root", str(self.folder / "root"), "--runroot", str(self.folder / "runroot")]
        return subprocess.run(
            ["podman", *storage, *args],
            env=self.environment,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def log_tail(self, lines: int = 20) -> str:
        log = self.folder / "service.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""

    def close(self) -> None:
        """Remove what the service has, stop it, reset its storage; what could not be done is in
        `problems` (the caller fails the session on them)."""
        if self.client is not None:
            self._remove_everything()
            self.client.close()
        self._stop()
        self._kill_leftover_processes(expected=True)
        for _ in range(RESET_TRIES):  # a reset may race podman's own event log in its tmp folder
            reset = self.podman("system", "reset", "--force")
            if reset.returncode == 0:
                break
            time.sleep(1)
        else:
            self.problems.append(f"podman system reset failed: {reset.stderr.strip()[-500:]}")
        self._unmount_leftovers()
        self._kill_leftover_processes(expected=False)

    def _inside(self, text: str) -> bool:
        """Does `text` (a path, an argument) name the service's folder or something in it?"""
        folder = str(self.folder)
        return any(word == folder or word.startswith(f"{folder}/") for word in text.replace("=", " ").split())

    def _remove_everything(self) -> None:
        client = self.client
        with contextlib.suppress(docker.errors.APIError, OSError):
            for container in client.containers.list(all=True):
                with contextlib.suppress(docker.errors.APIError):
                    container.remove(force=True, v=True)
        with contextlib.suppress(docker.errors.APIError, OSError):
            for volume in client.volumes.list():
                with contextlib.suppress(docker.errors.APIError):
                    volume.remove(force=True)
        with contextlib.suppress(docker.errors.APIError, OSError):
            for network in client.networks.list():
                if network.name not in DEFAULT_NETWORKS:
                    with contextlib.suppress(docker.errors.APIError):
                        network.remove()

    def _stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT)

    def _unmount_leftovers(self) -> None:
        """Mounts under the service's folder that the reset left (there should be none)."""
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        leftovers = sorted((m for m in mounts if self._inside(m)), key=len, reverse=True)
        for mount in leftovers:
            subprocess.run(["umount", "-l", mount], capture_output=True)
        if leftovers:
            self.problems.append(f"mounts left after podman system reset: {leftovers}")

    def _kill_leftover_processes(self, expected: bool) -> None:
        """Kill processes of this service's containers that outlived it. Expected before the reset:
        podman keeps the conmon of an exec session (`exec_run`) for 300 s (--exit-delay), container or
        not. None may be left after the reset."""
        leftovers = []
        for process in psutil.process_iter(["cmdline"]):
            if process.pid != os.getpid() and any(map(self._inside, process.info["cmdline"] or [])):
                leftovers.append(process)
        described = [f"{p.pid} {' '.join(p.info['cmdline'] or [])[:300]}" for p in leftovers]
        for process in leftovers:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(leftovers, timeout=STOP_TIMEOUT)
        if leftovers and not expected:
            self.problems.append(f"processes left after podman system reset: {described}")


def start_podman_service(folder: Path) -> PodmanService:
    """Start a private podman service with its storage and socket in `folder`; wait until it answers."""
    if not shutil.which("podman") or not shutil.which("runc", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"):
        pytest.fail("podman or runc is missing: apt-get install podman runc (scripts/test.sh does)")
    (folder / "containers.conf").write_text(CONTAINERS_CONF.format(folder=folder))
    socket = folder / "podman.sock"
    url = f"unix://{socket}"
    storage = ["--root", str(folder / "root"), "--runroot", str(folder / "runroot")]
    with open(folder / "service.log", "w") as log:
        process = subprocess.Popen(
            ["podman", *storage, "system", "service", "--time=0", url],
            env={**os.environ, "CONTAINERS_CONF": str(folder / "containers.conf")},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own session: a Ctrl-C of pytest does not reach it, teardown stops it
        )
    service = PodmanService(folder, process, url)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and process.poll() is None:
        if socket.exists():
            with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
                service.client = docker.DockerClient(base_url=url, timeout=600)
                if service.client.ping():
                    return service
        time.sleep(0.2)
    service.close()
    pytest.fail(f"the podman service did not answer at {url} within {START_TIMEOUT:g} s:\n{service.log_tail()}")


@pytest.fixture(scope="session")
def podman_service(tmp_path_factory) -> Iterator[PodmanService]:
    """The session's private podman service."""
    service = start_podman_service(tmp_path_factory.mktemp("podman"))
    try:
        yield service
    finally:
        service.close()
        assert not service.problems, service.problems


@dataclass(frozen=True)
class DimsterImages:
    """References of dimster's images in the session's podman service."""

    kafka_version: str
    base: str
    kafka: str
    worker: str


@pytest.fixture(scope="session")
def dimster_images(podman_service: PodmanService) -> DimsterImages:
    """dimster's base, Kafka and worker images, built once per session in the private service."""
    client, version = podman_service.client, DEFAULT_KAFKA_VERSION
    return DimsterImages(
        version,
        images.base_image(client, print),
        images.kafka_image(client, version, print),
        images.worker_image(client, version, print),
    )
