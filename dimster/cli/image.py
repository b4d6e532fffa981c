"""`dimster image build` and `dimster image list`: the images dimster builds itself through a
Docker-compatible daemon, for machines that cannot pull apache/kafka (no registry needed). The
Docker SDK is imported by the commands that talk to a daemon, so that other commands start fast."""

import datetime
import re

import typer

from dimster.cli.output import console, err_console, print_json
from dimster.environment import DEFAULT_KAFKA_VERSION
from dimster.errors import DimsterError

app = typer.Typer(help="Images dimster builds for containers: base, Kafka, worker.", no_args_is_help=True)
DockerHostOpt = typer.Option(
    None, "--docker-host", help="The daemon's address, e.g. unix:///run/podman/podman.sock (default: $DOCKER_HOST)."
)
JsonOpt = typer.Option(False, "--json", help="Print JSON.")
DEFAULT_REGISTRY_PREFIXES = ("docker.io/library/", "localhost/")  # how daemons spell a local short name


def _progress(message: str) -> None:
    """Progress on stderr, as it comes: stdout stays clean for --json."""
    err_console.print(message, markup=False, highlight=False)


@app.command()
def build(
    kafka_version: str = typer.Option(DEFAULT_KAFKA_VERSION, "--kafka-version", help="The Kafka version to lay out."),
    docker_host: str = DockerHostOpt,
    worker: bool = typer.Option(True, "--worker/--no-worker", help="Also build the worker image."),
    json: bool = JsonOpt,
) -> None:
    """Build dimster-base:bookworm (Debian by mmdebstrap, Java 17, Python 3), dimster-kafka:VERSION
    and dimster-worker:DIMSTER-kafkaVERSION; each only when what goes into it changed."""
    if not re.fullmatch(r"\d+\.\d+\.\d+", kafka_version):
        raise DimsterError(f"--kafka-version '{kafka_version}' is not a Kafka version like {DEFAULT_KAFKA_VERSION}")
    from dimster.containers.daemon import connect, daemon_address
    from dimster.containers.images import base_image, kafka_image, worker_image

    client = connect(docker_host)
    try:
        references = {"base": base_image(client, _progress), "kafka": kafka_image(client, kafka_version, _progress)}
        if worker:
            references["worker"] = worker_image(client, kafka_version, _progress)
    finally:
        client.close()
    if json:
        print_json({"dockerHost": daemon_address(docker_host), "images": references})
        return
    for kind, reference in references.items():
        console.print(f"{kind}: {reference}", markup=False)


@app.command("list")
def list_images(docker_host: str = DockerHostOpt, json: bool = JsonOpt) -> None:
    """The images labelled io.dimster on the daemon: what, which Kafka, id, created, size."""
    from dimster.containers.daemon import DAEMON_ERRORS, LABEL, api_reason, connect, daemon_address
    from dimster.containers.images import KIND_LABEL

    client = connect(docker_host)
    try:
        images = client.images.list(filters={"label": LABEL})
    except DAEMON_ERRORS as e:
        raise DimsterError(f"the Docker daemon at {daemon_address(docker_host)} refused: {api_reason(e)}") from None
    finally:
        client.close()
    rows = []
    for image in images:
        image_labels = image.labels or {}
        for reference in sorted(image.tags) or ["<none>"]:
            rows.append(
                {
                    "reference": short_reference(reference),
                    "kind": image_labels.get(KIND_LABEL, ""),
                    "kafka": image_labels.get(f"{LABEL}.kafka", ""),
                    "id": image.short_id.removeprefix("sha256:"),
                    "created": _created(image.attrs.get("Created")),
                    "sizeBytes": image.attrs.get("Size") or 0,
                }
            )
    rows.sort(key=lambda row: (row["reference"] == "<none>", row["reference"]))
    if json:
        print_json(rows)
        return
    if not rows:
        console.print(f"no images labelled {LABEL} at {daemon_address(docker_host)}: `dimster image build` makes them")
        return
    # plain aligned columns, like `docker images`: a table would wrap references on a narrow terminal
    lines = [("IMAGE", "KIND", "KAFKA", "ID", "CREATED (UTC)", "SIZE")]
    for row in rows:
        size = f"{row['sizeBytes'] / 2**20:.0f} MB"
        lines.append((row["reference"], row["kind"], row["kafka"], row["id"], row["created"], size))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for line in lines:
        text = "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        console.print(text.rstrip(), markup=False)


def short_reference(reference: str) -> str:
    """`dimster-kafka:4.3.1` for podman's `docker.io/library/dimster-kafka:4.3.1`."""
    for prefix in DEFAULT_REGISTRY_PREFIXES:
        if reference.startswith(prefix):
            return reference.removeprefix(prefix)
    return reference


def _created(value) -> str:
    """An image's creation time (Docker lists seconds since the epoch, podman ISO text), to the second, UTC."""
    if isinstance(value, int | float):
        return datetime.datetime.fromtimestamp(value, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return str(value or "")[:19].replace("T", " ")
