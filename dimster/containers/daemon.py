"""The connection to a Docker-compatible daemon (Docker, or podman's Docker API), and the labels that
mark everything dimster creates there."""

import contextlib
import os
import threading
import time

import docker
import docker.errors
import requests.exceptions

from dimster.errors import DimsterError

LABEL = "io.dimster"  # the key prefix of dimster's labels; `io.dimster=1` marks all it creates
DEFAULT_HOST = "unix:///var/run/docker.sock"  # where the Docker SDK looks without DOCKER_HOST
CONNECT_TIMEOUT = 10.0  # seconds the first answer (the ping) may take
REQUEST_TIMEOUT = 600.0  # seconds any later request may go without a byte (an image build, a big import)
# what a request to a daemon that answered once may still raise: its refusal, or a lost connection
DAEMON_ERRORS = (docker.errors.APIError, requests.exceptions.RequestException)
REMOVE_TRIES = 4  # a removal refused while the container's own clean-up still runs succeeds soon after
REMOVE_PAUSE = 1.0  # seconds before the second try, growing by as much each time
HINT = (
    "start Docker, or podman's Docker-compatible API (podman system service), "
    "and point dockerHost in the profile or DOCKER_HOST at it"
)


def labels(**kv: str) -> dict[str, str]:
    """dimster's labels: `io.dimster=1` and `io.dimster.<key>=<value>` for each keyword."""
    return {LABEL: "1", **{f"{LABEL}.{key}": str(value) for key, value in kv.items()}}


def label_filter(**kv: str) -> dict[str, list[str]]:
    """A list filter for what carries all of dimster's labels `kv`."""
    return {"label": [f"{key}={value}" for key, value in labels(**kv).items()]}


def daemon_address(base_url: str | None = None) -> str:
    """The address a client of `base_url` talks to: it, else $DOCKER_HOST, else the SDK's default."""
    return base_url or os.environ.get("DOCKER_HOST") or DEFAULT_HOST


def connect(base_url: str | None = None) -> docker.DockerClient:
    """A client of the daemon at `base_url` (else $DOCKER_HOST, else the SDK's default socket) that has
    answered a ping; a DimsterError of one line when no daemon answers there."""
    address = daemon_address(base_url)
    environment = {**os.environ, "DOCKER_HOST": address}  # DOCKER_TLS_VERIFY and DOCKER_CERT_PATH still apply
    try:
        # The SDK asks the daemon for its API version here already: a dead address fails in the constructor.
        client = docker.from_env(environment=environment, timeout=CONNECT_TIMEOUT)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as e:
        raise DimsterError(f"no Docker daemon answers at {address} ({failure_reason(e)}): {HINT}") from None
    client.api.timeout = REQUEST_TIMEOUT
    return client


def failure_reason(error: BaseException) -> str:
    """Why a connection failed, in a few words: the innermost OS error ('connection refused', 'no such
    file or directory'), a timeout, else the error's own first line."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            return current.strerror.lower()
        if isinstance(current, TimeoutError | requests.exceptions.Timeout):
            return f"no answer within {CONNECT_TIMEOUT:g} s"
        pending += [c for c in (current.__cause__, current.__context__) if c is not None]
        pending += [a for a in current.args if isinstance(a, BaseException)]
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


def api_reason(error: BaseException) -> str:
    """The first line of what the daemon said when it refused a request (or of the error itself)."""
    text = str(getattr(error, "explanation", None) or error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__


def stop_and_remove(containers: list, seconds: float) -> list[str]:
    """Stop `containers` all at once (SIGTERM, SIGKILL after `seconds`), then remove each with its
    anonymous volumes (an image may declare some, apache/kafka does; named volumes stay). A removal
    the daemon refuses is tried again a few times; what it still keeps is returned, each as
    'name: the daemon's reason', for the caller to say (a clean-up after a failure passes over it)."""
    kept: dict[str, str] = {}

    def stop(container) -> None:
        with contextlib.suppress(*DAEMON_ERRORS):
            container.stop(timeout=seconds)
        for attempt in range(REMOVE_TRIES):
            try:
                container.remove(force=True, v=True)
                container.reload()  # a daemon may answer yes and still have it
                kept[container.name] = "still there after its removal"
            except docker.errors.NotFound:
                kept.pop(container.name, None)
                return
            except DAEMON_ERRORS as e:
                kept[container.name] = api_reason(e)
            if attempt + 1 < REMOVE_TRIES:
                time.sleep(REMOVE_PAUSE * (attempt + 1))

    threads = [threading.Thread(target=stop, args=(c,)) for c in containers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [f"{name}: {reason}" for name, reason in sorted(kept.items())]


def removed_or_fail(kept: list[str], what: str) -> None:
    """A DimsterError naming the containers of `what` the daemon would not remove, if any."""
    if kept:
        raise DimsterError(f"the daemon did not remove {what}: {'; '.join(kept)}")
