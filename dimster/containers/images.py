"""The images dimster builds itself through a Docker-compatible daemon, for machines that cannot pull
apache/kafka: a Debian base with a Java 17 runtime and Python 3 (mmdebstrap, imported), Kafka laid out
like the official image, and a worker image that runs `dimster worker serve`.

Every image carries dimster's labels and a content stamp, a hash of all that went into it (its parent
image included): a build whose stamp matches the image of that name is skipped."""

import contextlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import docker
import docker.errors

from dimster import __version__
from dimster.containers.build import (
    STAMP_LABEL,
    BuildContext,
    Progress,
    build,
    build_if_changed,
    built,
    daemon_errors,
    digest,
    existing_image,
    imported_id,
)
from dimster.containers.daemon import LABEL, labels
from dimster.errors import DimsterError
from dimster.kafka.distribution import KafkaDistribution, java_executable, kafka_distribution, last_error_line
from dimster.paths import PACKAGE_DIR, cache_dir

KIND_LABEL = f"{LABEL}.image"
BASE_REPOSITORY, BASE_TAG = "dimster-base", "bookworm"
KAFKA_REPOSITORY = "dimster-kafka"
WORKER_REPOSITORY = "dimster-worker"

# ---- the base: Debian by mmdebstrap ----------------------------------------------------------------------
DEBIAN_SUITE = "bookworm"
IMAGE_USER = "appuser"
DEBIAN_SOURCES = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
BASE_PACKAGES = ("openjdk-17-jre-headless", "python3", "ca-certificates")
MERGED_USR_HOOKS = Path("/usr/share/mmdebstrap/hooks/merged-usr")  # else `usrmerge` pulls in all of perl
MMDEBSTRAP_OPTIONS = (
    "--variant=essential",  # Essential: yes packages and what --include needs; no apt
    f"--include={','.join(BASE_PACKAGES)}",
    "--aptopt=APT::Install-Recommends false",
    "--skip=output/dev",  # no device nodes in the tarball: the container runtime makes /dev
    # update-alternatives links java's man page there, even when man pages are left out
    '--essential-hook=mkdir -p "$1/usr/share/man/man1"',
    *(
        f"--dpkgopt=path-exclude=/usr/share/{folder}/*"
        for folder in ("man", "doc", "info", "locale", "lintian", "linda", "bug")
    ),
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",  # the licences stay
    # the official apache/kafka image's user (uid 1000): volumes formatted by one image suit the other
    f'--customize-hook=echo "{IMAGE_USER}:x:1000:1000::/opt/kafka:/bin/sh" >> "$1/etc/passwd"',
    f'--customize-hook=echo "{IMAGE_USER}:x:1000:" >> "$1/etc/group"',
)
BASE_CONFIG = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["/bin/bash"]',
)
MMDEBSTRAP_HINT = "mmdebstrap is not installed (Debian: apt-get install mmdebstrap): it builds dimster's base image"

# ---- the worker's Python packages ------------------------------------------------------------------------
IMAGE_PYTHON = "3.11"  # Debian bookworm's python3
IMAGE_GLIBC_MINOR = 36  # bookworm's glibc is 2.36: manylinux wheels up to manylinux_2_36 run there
# Needed only by the summary (Spark) and the reports, which never run on a worker.
NOT_ON_WORKERS = frozenset({"pyspark", "pandas", "plotly"})
JAVA_RELEASE = 17  # the image's JRE: the helper classes must be compiled for it
IMAGE_CACHE = "/opt/dimster/cache"  # DIMSTER_CACHE_DIR in the worker image


def _quiet(_message: str) -> None:
    pass


# ---- the three images ------------------------------------------------------------------------------------
def base_image(client: docker.DockerClient, progress: Progress = _quiet) -> str:
    """`dimster-base:bookworm`: Debian bookworm with a Java 17 runtime (headless), python3 and
    ca-certificates, made by mmdebstrap and imported; its reference."""
    reference = f"{BASE_REPOSITORY}:{BASE_TAG}"
    recipe = {
        "suite": DEBIAN_SUITE,
        "sources": DEBIAN_SOURCES,
        "options": _mmdebstrap_options(),
        "config": BASE_CONFIG,
        "arch": _machine(),
    }
    stamp = digest(json.dumps(recipe, sort_keys=True).encode())
    with daemon_errors(reference):
        old = existing_image(client, reference)
        if old is not None and old.labels.get(STAMP_LABEL) == stamp:
            return reference
        mmdebstrap = shutil.which("mmdebstrap")
        if not mmdebstrap:
            raise DimsterError(f"{MMDEBSTRAP_HINT}; or set image: apache/kafka:VERSION on a machine that can pull it")
        started = time.monotonic()
        what = f"Debian {DEBIAN_SUITE}, Java 17, Python 3 by mmdebstrap"
        progress(f"building {reference}: {what} (half a minute or so) ...")
        with tempfile.TemporaryDirectory(prefix="dimster-base.") as folder:
            tarball = Path(folder) / "rootfs.tar"
            _mmdebstrap(mmdebstrap, tarball)
            progress(f"importing {reference} ({tarball.stat().st_size / 2**20:.0f} MB) ...")
            image_labels = labels(image="base", stamp=stamp)
            changes = [*(f"LABEL {key}={value}" for key, value in image_labels.items()), *BASE_CONFIG]
            answer = client.api.import_image(src=str(tarball), changes=changes)
        image = client.images.get(imported_id(reference, answer))
        if image.labels.get(STAMP_LABEL) == stamp:
            image.tag(BASE_REPOSITORY, BASE_TAG)
        else:  # a daemon that takes no LABEL on import: label it by a build on top
            context = BuildContext()
            context.file("Dockerfile", f"FROM {image.id}\n".encode())
            build(client, reference, context, image_labels, progress)
        built(client, reference, old, started, progress)
    return reference


def kafka_image(client: docker.DockerClient, version: str, progress: Progress = _quiet) -> str:
    """`dimster-kafka:<version>`: the base with Kafka `version` laid out like the official apache/kafka
    image (/opt/kafka/libs, /opt/kafka/bin/kafka-{server-start,storage,run-class}.sh, /opt/kafka/config,
    an empty /var/lib/kafka/data; all of user appuser, uid 1000, who runs it, as there), the jars of
    dimster's cached distribution; its reference."""
    parent = base_image(client, progress)
    reference = f"{KAFKA_REPOSITORY}:{version}"
    distribution = kafka_distribution(version)
    files = resources.files("dimster.containers") / "kafka-image"
    context = BuildContext()
    context.file(
        "Dockerfile",
        f"""FROM {parent}
COPY --chown=1000:1000 libs/ /opt/kafka/libs/
COPY --chown=1000:1000 kafka/ /opt/kafka/
COPY --chown=1000:1000 data/ /var/lib/kafka/data/
WORKDIR /opt/kafka
USER {IMAGE_USER}
""".encode(),
    )
    context.tree("libs", distribution.libs)
    for script in ("kafka-run-class.sh", "kafka-server-start.sh", "kafka-storage.sh"):
        context.file(f"kafka/bin/{script}", (files / "bin" / script).read_bytes(), mode=0o755)
    for config in ("log4j2.properties", "tools-log4j2.properties"):
        context.file(f"kafka/config/{config}", (files / "config" / config).read_bytes())
    context.directory("data")
    return build_if_changed(client, reference, parent, context, {"image": "kafka", "kafka": version}, progress)


def worker_image(client: docker.DockerClient, version: str, progress: Progress = _quiet) -> str:
    """`dimster-worker:<dimster version>-kafka<version>`: the Kafka image with dimster (its Python
    packages but Spark's and the reports', its Java classes compiled) to run `python3 -m dimster worker
    serve --listen 0.0.0.0:PORT`; its reference. A change to dimster's sources rebuilds it."""
    parent = kafka_image(client, version, progress)
    reference = f"{WORKER_REPOSITORY}:{__version__}-kafka{version}"
    distribution = kafka_distribution(version)
    site, site_key = python_site(progress)
    home = f"cache/kafka/{version}"
    context = BuildContext()
    context.file(
        "Dockerfile",
        f"""FROM {parent}
COPY site/ /opt/dimster/site/
COPY cache/ {IMAGE_CACHE}/
COPY python/ /opt/dimster/python/
ENV PYTHONPATH=/opt/dimster/python:/opt/dimster/site DIMSTER_CACHE_DIR={IMAGE_CACHE}
WORKDIR /opt/dimster
USER root
ENTRYPOINT ["python3", "-m", "dimster"]
CMD ["--help"]
""".encode(),
    )
    context.tree("site", site, stamp=site_key)  # the folder of a key never changes: its key stands for it
    context.symlink(f"{home}/libs", "/opt/kafka/libs")  # what kafka_distribution() looks for
    with tempfile.TemporaryDirectory(prefix="dimster-helper.") as scratch:
        context.tree(f"{home}/helper/{distribution.helper_key}", helper_classes(distribution, Path(scratch)))
        context.tree("python/dimster", PACKAGE_DIR, exclude=frozenset({"__pycache__"}))
        kind = {"image": "worker", "kafka": version, "version": __version__}
        return build_if_changed(client, reference, parent, context, kind, progress)


# ---- the worker's parts ----------------------------------------------------------------------------------
def worker_requirements() -> list[str]:
    """dimster's runtime requirements a worker needs, pinned to the versions installed here (so that
    the agents run what the coordinator runs); Spark's and the reports' left out."""
    try:
        specs = importlib.metadata.requires("dimster") or []
    except importlib.metadata.PackageNotFoundError:
        raise DimsterError("dimster's package metadata is missing: install it (pip install -e .)") from None
    wanted = []
    for spec in specs:
        requirement, _, marker = spec.partition(";")
        if "extra" in marker:
            continue
        named = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
        assert named is not None, f"dimster's metadata requires {spec!r}, which names no package"
        name = named.group(0)
        if _normalized(name) in NOT_ON_WORKERS:
            continue
        try:
            wanted.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            wanted.append(requirement.strip())
    return sorted(wanted, key=str.lower)


def wheel_platforms(machine: str | None = None) -> list[str]:
    """The wheel platform tags that run in the image (manylinux up to bookworm's glibc) on this
    machine's architecture."""
    arch = _machine(machine)
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(IMAGE_GLIBC_MINOR, 16, -1)]
    return [*tags, f"manylinux2014_{arch}"]  # pip adds manylinux2010 and manylinux1 to this one


def python_site(progress: Progress = _quiet) -> tuple[Path, str]:
    """A folder of the worker's Python packages for the image's Python, installed by pip for that
    Python and platform (binary wheels only), and its key. Cached under dimster's cache folder by the
    key, a hash of what was asked of pip: the second build takes it from there."""
    requirements = worker_requirements()
    options = [
        "--only-binary=:all:",
        f"--python-version={IMAGE_PYTHON}",
        "--implementation=cp",
        *(f"--platform={tag}" for tag in wheel_platforms()),
    ]
    key = digest(json.dumps([options, requirements]).encode())[:16]
    folder = cache_dir() / "containers" / f"python{IMAGE_PYTHON}-site" / key
    if folder.is_dir():
        return folder, key
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=folder.parent))
    try:
        progress(f"installing the worker's Python packages for Python {IMAGE_PYTHON} ({len(requirements)}) ...")
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        command += ["--no-warn-script-location", "--target", str(partial), *options, *requirements]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            output = result.stderr.strip() or result.stdout.strip()
            errors = [line for line in output.splitlines() if line.startswith("ERROR")]
            raise DimsterError(
                f"pip could not install the worker image's packages: {(errors or output.splitlines() or ['?'])[0]}",
                detail="\n".join(output.splitlines()[-15:]),
            )
        shutil.rmtree(partial / "bin", ignore_errors=True)  # console scripts for this host's python
        with contextlib.suppress(OSError):  # another process made the same folder first
            partial.rename(folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder, key


def helper_classes(distribution: KafkaDistribution, scratch: Path) -> Path:
    """dimster's Java classes of `distribution` as the worker image needs them: compiled here (the
    image's JRE has no javac), for Java 17, with the `sources.java` stamp kafka_distribution() checks.
    The cached ones when they run on Java 17, else a compilation for it in `scratch`."""
    helper = distribution.helper
    if max((_class_major(path) for path in helper.glob("*.class")), default=0) <= 44 + JAVA_RELEASE:
        return helper
    javac = Path(java_executable()).with_name("javac")
    sources = [path for path in (resources.files("dimster.kafka") / "java").iterdir() if path.name.endswith(".java")]
    sources.sort(key=lambda path: path.name)
    result = subprocess.run(
        [str(javac), "-nowarn", "--release", str(JAVA_RELEASE), "-d", str(scratch), "-cp", str(distribution.libs / "*")]
        + [str(path) for path in sources],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise DimsterError(
            f"could not compile dimster's Java classes for Java {JAVA_RELEASE}: "
            f"{last_error_line(result.stderr) or result.stderr.strip()}"
        )
    shutil.copyfile(helper / "sources.java", scratch / "sources.java")
    return scratch


def _class_major(path: Path) -> int:
    """The class file version of a .class (52 is Java 8, 61 Java 17)."""
    with open(path, "rb") as f:
        header = f.read(8)
    return int.from_bytes(header[6:8], "big")


def _mmdebstrap_options() -> list[str]:
    options = list(MMDEBSTRAP_OPTIONS)
    if MERGED_USR_HOOKS.is_dir():
        options.append(f"--hook-dir={MERGED_USR_HOOKS}")
    return options


def _mmdebstrap(mmdebstrap: str, tarball: Path) -> None:
    options = _mmdebstrap_options()
    if os.geteuid() != 0:
        options.append("--mode=unshare")  # needs user namespaces, newuidmap (uidmap) and /etc/subuid
    command = [mmdebstrap, *options, DEBIAN_SUITE, str(tarball), *DEBIAN_SOURCES]
    # stdin closed: without a tty mmdebstrap would read the mirror list from it
    result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if result.returncode != 0:
        output = (result.stderr + result.stdout).strip()
        errors = [line for line in output.splitlines() if line.startswith("E:")]
        root = "" if os.geteuid() == 0 else " (it needs root, or user namespaces for --mode=unshare)"
        raise DimsterError(
            f"mmdebstrap could not make the base image's Debian{root}: {(errors or output.splitlines() or ['?'])[0]}",
            detail="\n".join(output.splitlines()[-15:]),
        )


def _machine(machine: str | None = None) -> str:
    machine = (machine or platform.machine()).lower()
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(machine)
    if arch is None:
        raise DimsterError(f"dimster builds images for x86_64 and aarch64 only, not for this {machine} machine")
    return arch


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
