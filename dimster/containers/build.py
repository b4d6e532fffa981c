"""Building an image through a Docker-compatible daemon: a build context made here (a Dockerfile and
files, hashed into a content stamp) and sent as a tar, the daemon's answers as one line each, and a
build skipped when the image of that name carries the same stamp."""

import contextlib
import hashlib
import io
import json
import os
import re
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

from dimster.containers.daemon import LABEL, failure_reason, labels
from dimster.errors import DimsterError

Progress = Callable[[str], None]

STAMP_LABEL = f"{LABEL}.stamp"


@dataclass(frozen=True)
class _Entry:
    arcname: str
    source: Path | None = None  # a file or folder here
    data: bytes | None = None  # a file made here
    link: str | None = None  # a symbolic link's target
    mode: int = 0o644
    stamp: str | None = None  # stands for the content in the content stamp (a tree of fixed content)


class BuildContext:
    """A build context: a Dockerfile and files, sent to the daemon as a tar; `digest()` hashes all of it
    (paths, modes, contents), not the times of the files."""

    def __init__(self) -> None:
        self.entries: list[_Entry] = []

    def file(self, arcname: str, data: bytes, mode: int = 0o644) -> None:
        self.entries.append(_Entry(arcname, data=data, mode=mode))

    def directory(self, arcname: str) -> None:
        self.entries.append(_Entry(arcname, mode=0o755))

    def symlink(self, arcname: str, target: str) -> None:
        self.entries.append(_Entry(arcname, link=target, mode=0o777))

    def tree(self, arcname: str, folder: Path, *, exclude: frozenset[str] = frozenset(), stamp: str | None = None):
        """`folder` (files, folders, links; none named in `exclude`) as `arcname`; `stamp`, when given,
        stands for its content in the digest."""
        folder = Path(folder)
        if not folder.is_dir():
            raise DimsterError(f"{folder} is missing: it goes into an image")
        self.entries.append(_Entry(arcname, source=folder, mode=0o755, stamp=stamp))
        for root, folders, names in os.walk(folder):
            folders[:] = sorted(name for name in folders if name not in exclude)
            for name in [*sorted(name for name in names if name not in exclude), *folders]:
                path = Path(root) / name
                relative = path.relative_to(folder).as_posix()
                mode = path.lstat().st_mode & 0o777
                self.entries.append(_Entry(f"{arcname}/{relative}", source=path, mode=mode, stamp=stamp))

    def digest(self) -> str:
        hasher = hashlib.sha256()
        stamped: set[str] = set()
        for entry in sorted(self.entries, key=lambda e: e.arcname):
            if entry.stamp is not None:
                if entry.stamp not in stamped:
                    stamped.add(entry.stamp)
                    hasher.update(f"tree {entry.arcname} {entry.stamp}\n".encode())
                continue
            hasher.update(f"{entry.arcname} {entry.mode:o} ".encode())
            if entry.link is not None:
                hasher.update(f"-> {entry.link}".encode())
            elif entry.data is not None:
                hasher.update(hashlib.sha256(entry.data).digest())
            elif entry.source is None:  # a folder made here
                pass
            elif entry.source.is_symlink():
                hasher.update(f"-> {os.readlink(entry.source)}".encode())
            elif entry.source.is_file():
                with open(entry.source, "rb") as f:
                    hasher.update(hashlib.file_digest(f, "sha256").digest())
            hasher.update(b"\n")
        return hasher.hexdigest()

    def write(self, fileobj) -> None:
        with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT) as tar:
            written: set[str] = set()
            for entry in self.entries:
                for parent in reversed(Path(entry.arcname).parents[:-1]):  # folders the entry is in, first
                    if parent.as_posix() not in written:
                        written.add(parent.as_posix())
                        folder = tarfile.TarInfo(parent.as_posix())
                        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
                        tar.addfile(folder)
                written.add(entry.arcname)
                if entry.source is not None:
                    # the real times: the .pyc files pip compiled name their sources' times
                    info = tar.gettarinfo(str(entry.source), arcname=entry.arcname)
                else:
                    info = tarfile.TarInfo(entry.arcname)
                    info.mtime = 0
                    if entry.link is not None:
                        info.type, info.linkname = tarfile.SYMTYPE, entry.link
                    elif entry.data is not None:
                        info.size = len(entry.data)
                    else:
                        info.type = tarfile.DIRTYPE
                info.mode, info.uid, info.gid, info.uname, info.gname = entry.mode, 0, 0, "root", "root"
                if info.isreg() and entry.data is not None:
                    tar.addfile(info, io.BytesIO(entry.data))
                elif info.isreg() and entry.source is not None:  # without data: copied from its source
                    with open(entry.source, "rb") as content:
                        tar.addfile(info, content)
                else:
                    tar.addfile(info)


def build_if_changed(
    client: docker.DockerClient,
    reference: str,
    parent: str,
    context: BuildContext,
    kind: dict[str, str],
    progress: Progress,
) -> str:
    with daemon_errors(reference):
        parent_id = client.images.get(parent).id
        stamp = digest(f"{parent_id} {context.digest()}".encode())
        old = existing_image(client, reference)
        if old is not None and old.labels.get(STAMP_LABEL) == stamp:
            return reference
        started = time.monotonic()
        progress(f"building {reference} ...")
        build(client, reference, context, labels(**kind, stamp=stamp), progress)
        built(client, reference, old, started, progress)
    return reference


STEP = re.compile(r"^(STEP|Step) \d+/\d+ ?:")


def build(
    client: docker.DockerClient, reference: str, context: BuildContext, image_labels: dict, progress: Progress
) -> None:
    """Build `context` as `reference` with `image_labels`; the daemon's steps go to `progress`."""
    with tempfile.TemporaryFile(prefix="dimster-context.") as fileobj:
        context.write(fileobj)
        fileobj.seek(0)
        stream = client.api.build(
            fileobj=fileobj,
            custom_context=True,
            tag=reference,
            labels=image_labels,
            rm=True,
            forcerm=True,
            pull=False,
            decode=True,
        )
        for chunk in stream:
            if "error" in chunk or "errorDetail" in chunk:
                message = chunk.get("error") or chunk["errorDetail"].get("message", "")
                raise DimsterError(f"could not build {reference}: {one_line(message)}")
            line = str(chunk.get("stream", "")).strip()
            if STEP.match(line):
                progress(f"  {line}")


def built(client: docker.DockerClient, reference: str, old, started: float, progress: Progress) -> None:
    """Report a build; drop the image the name had before, when nothing else uses it."""
    image = client.images.get(reference)
    size = image.attrs.get("Size") or 0
    progress(f"built {reference} in {time.monotonic() - started:.0f} s ({size / 2**20:.0f} MB)")
    if old is not None and old.id != image.id:
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(old.id)


def existing_image(client: docker.DockerClient, reference: str):
    try:
        return client.images.get(reference)
    except docker.errors.ImageNotFound:
        return None


def imported_id(reference: str, answer) -> str:
    """The image id in the daemon's answer to an import (lines of JSON), or its error as a DimsterError."""
    text = answer.decode(errors="replace") if isinstance(answer, bytes) else str(answer)
    found = None
    for line in text.splitlines():
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(message, dict):
            continue
        if "error" in message or "errorDetail" in message:
            detail = message.get("error") or (message.get("errorDetail") or {}).get("message", "")
            raise DimsterError(f"could not import {reference}: {one_line(detail)}")
        for key in ("status", "id"):
            match = re.fullmatch(r"(sha256:)?([0-9a-f]{64})", str(message.get(key, "")).strip())
            if match:
                found = f"sha256:{match.group(2)}"
    if not found:
        raise DimsterError(f"could not import {reference}: the daemon answered {one_line(text)[:200]!r}")
    return found


@contextlib.contextmanager
def daemon_errors(reference: str) -> Iterator[None]:
    """The daemon's errors while making `reference`, as one line."""
    try:
        yield
    except docker.errors.BuildError as e:
        raise DimsterError(f"could not build {reference}: {one_line(e.msg)}") from None
    except docker.errors.APIError as e:
        raise DimsterError(f"could not build {reference}: {one_line(e.explanation or str(e))}") from None
    except (requests.exceptions.RequestException, docker.errors.DockerException) as e:
        raise DimsterError(
            f"could not build {reference}: the Docker daemon stopped answering ({failure_reason(e)})"
        ) from None


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def one_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
