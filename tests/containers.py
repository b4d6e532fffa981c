"""A private podman service for the tests that need a Docker-compatible daemon, and dimster's images
built in it, kept from one session to the next.

tests/conftest.py imports both fixtures, so every test module may ask for them: the session has one
service and builds the images at most once.

The service has its own containers.conf, storage (--root, --runroot), temporary folder, network
configs and socket: it never sees the machine's own containers, images or networks, nor they its.
Its images live in a storage of the suite's own under dimster's cache (`test-podman/`), held by one
session at a time (a lock file), so that a later session finds dimster's images built and skips
their builds, as `dimster image build` skips an image whose content stamp matches; a session that
finds the storage held uses a temporary one. Everything else is the session's: at its end (failed
or not) every container, volume and network is removed, images left without a name are pruned, the
service is stopped by its PID, and no overlay mount nor conmon process may be left behind. The
podman CLI is used for that clean-up only."""

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
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
from dimster.paths import cache_dir
from tests import locks

CONTAINERS_CONF = """\
[containers]
default_ulimits = []

[engine]
runtime = "runc"
tmp_dir = "{runtime}/tmp"

[network]
network_config_dir = "{runtime}/networks"
"""
# A storage's database records its run-time folders and refuses others: the kept storage's are fixed
# (one session holds it at a time), each temporary storage's its own. Short: podman refuses a runroot
# of over 50 characters.
KEPT_RUNTIME = Path(tempfile.gettempdir()) / f"dimster-test-podman-{os.getuid()}"
DEFAULT_NETWORKS = {"bridge", "podman", "host", "none"}  # podman's own: not ours to remove
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
RESET_TRIES = 3  # `unlinkat .../tmp/events: directory not empty` was seen once; a second reset finishes it


@dataclass
class PodmanService:
    """A running `podman system service` of this session: `url` for DOCKER_HOST or a profile's
    dockerHost, `client` a Docker SDK client of it."""

    folder: Path  # the session's: configuration, temporary files, socket, log
    root: Path  # the storage: images, containers, volumes
    runtime: Path  # the storage's run-time state (runroot), temporary files and network configs
    process: subprocess.Popen
    url: str
    client: docker.DockerClient | None = None
    problems: list[str] = field(default_factory=list)
    kept: bool = False  # the storage is the suite's own, kept for the next session

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def environment(self) -> dict[str, str]:
        return {**os.environ, "CONTAINERS_CONF": str(self.folder / "containers.conf")}

    def podman(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """The podman CLI on this service's storage (for the clean-up only)."""
        storage = ["--root", str(self.root), "--runroot", str(self.runtime / "run")]
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

    def log_errors(self, lines: int = 10) -> list[str]:
        """The service's last error lines (why a removal failed, say)."""
        log = self.folder / "service.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        found = [line for line in text.splitlines() if "level=error" in line]
        return [line[:400] for line in found[-lines:]]

    def close(self) -> None:
        """Remove what the service has but the images of a kept storage, stop it, reset a temporary
        storage; what could not be done is in `problems` (the caller fails the session on them)."""
        if self.client is not None:
            self._remove_everything()
            if left := self.leftovers():
                self.problems.append(f"left after the clean-up: {left}")
            if self.kept:
                with contextlib.suppress(docker.errors.APIError, OSError):
                    self.client.images.prune(filters={"dangling": True})  # earlier builds of an image
            self.client.close()
        self._stop()
        self._kill_leftover_processes(expected=True)
        if not self.kept:
            self._reset_storage()
        self._unmount_leftovers()
        self._kill_leftover_processes(expected=False)
        if not self.kept:
            shutil.rmtree(self.runtime, ignore_errors=True)

    def _reset_storage(self) -> None:
        for _ in range(RESET_TRIES):  # a reset may race podman's own event log in its tmp folder
            reset = self.podman("system", "reset", "--force")
            if reset.returncode == 0:
                return
            time.sleep(1)
        self.problems.append(f"podman system reset failed: {reset.stderr.strip()[-500:]}")

    def _inside(self, text: str) -> bool:
        """Does `text` (a path, an argument) name one of the service's folders or something in them?"""
        folders = [str(path) for path in (self.folder, self.root, self.runtime)]
        words = text.replace("=", " ").split()
        return any(word == folder or word.startswith(f"{folder}/") for word in words for folder in folders)

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

    def leftovers(self) -> list[str]:
        """What the service still has but images: containers, volumes, networks of its own; or why
        it cannot say."""
        client = self.client
        assert client is not None
        try:
            found = [f"container {c.name}" for c in client.containers.list(all=True)]
            found += [f"volume {v.name}" for v in client.volumes.list()]
            found += [f"network {n.name}" for n in client.networks.list() if n.name not in DEFAULT_NETWORKS]
        except (docker.errors.APIError, requests.exceptions.RequestException) as e:
            return [f"nothing can be listed: {str(getattr(e, 'explanation', None) or e)[:300]}"]
        return found

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
        """Mounts under the service's folders left behind (there should be none), but the storage's
        own: podman's overlay driver binds a kept storage's overlay folder onto itself while it
        serves, and makes the bind again when the next session starts it."""
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        leftovers = sorted((m for m in mounts if self._inside(m)), key=len, reverse=True)
        for mount in leftovers:
            subprocess.run(["umount", "-l", mount], capture_output=True)
        unexpected = [m for m in leftovers if not (self.kept and m == str(self.root / "overlay"))]
        if unexpected:
            self.problems.append(f"mounts left after the service stopped: {unexpected}")

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


def kept_storage() -> Path | None:
    """The suite's own podman storage under dimster's cache, if no other session holds it now."""
    root = cache_dir() / "test-podman"
    root.mkdir(parents=True, exist_ok=True)
    return root if locks.hold(root.parent / "test-podman.lock") else None


def start_podman_service(folder: Path, root: Path | None = None) -> PodmanService:
    """Start a private podman service with its socket in `folder`, its storage in `root` (kept) or in
    `folder` (temporary); wait until it answers. A kept storage is cleared of what a session that died
    left in it, but its images; one that podman refuses (its database from another layout) or cannot
    clear starts anew."""
    if not shutil.which("podman") or not shutil.which("runc", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"):
        pytest.fail("podman or runc is missing: apt-get install podman runc (scripts/test.sh does)")
    if root is None:
        service = _start_service(folder, folder / "root", Path(tempfile.mkdtemp(prefix="dimster-podman-")), False)
    else:
        service = _start_service(folder, root, KEPT_RUNTIME, True)
        if service.client is None or service.leftovers():
            # A storage the service refuses, or one it cannot clear (a session killed mid-run left a
            # container its database calls running whose network namespace is gone): start anew.
            service.close()
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(KEPT_RUNTIME, ignore_errors=True)
            service = _start_service(folder, root, KEPT_RUNTIME, True)
    if service.client is None:
        answer = f"the podman service did not answer at {service.url} within {START_TIMEOUT:g} s"
        pytest.fail(f"{answer}:\n{service.log_tail()}")
    return service


def _start_service(folder: Path, root: Path, runtime: Path, kept: bool) -> PodmanService:
    """The service on `root`, with its client once it answers (None if it did not: then stopped)."""
    runroot = runtime / "run"
    runroot.mkdir(parents=True, exist_ok=True)
    (folder / "containers.conf").write_text(CONTAINERS_CONF.format(runtime=runtime))
    socket = folder / "podman.sock"
    socket.unlink(missing_ok=True)
    url = f"unix://{socket}"
    with open(folder / "service.log", "w") as log:
        process = subprocess.Popen(
            ["podman", "--root", str(root), "--runroot", str(runroot), "system", "service", "--time=0", url],
            env={**os.environ, "CONTAINERS_CONF": str(folder / "containers.conf")},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own session: a Ctrl-C of pytest does not reach it, teardown stops it
        )
    service = PodmanService(folder, root, runtime, process, url, kept=kept)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and process.poll() is None:
        if socket.exists():
            with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
                client = docker.DockerClient(base_url=url, timeout=600)
                if client.ping():
                    service.client = client
                    service._remove_everything()  # what a session that died left in a kept storage
                    return service
        time.sleep(0.2)
    service.close()
    return service


@pytest.fixture(scope="session")
def podman_service(tmp_path_factory) -> Iterator[PodmanService]:
    """The session's private podman service, on the suite's kept storage when it is free."""
    service = start_podman_service(tmp_path_factory.mktemp("podman"), kept_storage())
    try:
        yield service
    finally:
        service.close()
        assert not service.problems, [*service.problems, "the service's last errors:", *service.log_errors()]


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
