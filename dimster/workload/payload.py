"""Message values: a fixed header (producer id, sequence number, intended send time) then a body
that is random, compressible or a file's bytes. The header makes latency free of coordinated omission
and lets consumers count lost and duplicated records."""

from __future__ import annotations

import base64
import functools
import os
import random
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dimster.errors import DimsterError
from dimster.paths import display

if TYPE_CHECKING:  # numpy is imported where headers are read in bulk, not by every `dimster` command
    import numpy as np

MAGIC = b"DM"
HEADER = struct.Struct(">2sBIQq")  # magic, version, producer id, sequence, intended send time (ns)
HEADER_SIZE = HEADER.size
HEADER_FIELDS = [  # HEADER's layout, field by field
    ("magic", "S2"), ("version", "u1"), ("producer_id", ">u4"), ("sequence", ">u8"), ("intended_ns", ">i8")
]  # fmt: skip
VERSION = 1
CHECKSUM = struct.Struct(">I")  # correctness mode: a body starts with the CRC-32 of the rest of it


def pack_header(producer_id: int, sequence: int, intended_ns: int) -> bytes:
    return HEADER.pack(MAGIC, VERSION, producer_id, sequence, intended_ns)


def unpack_header(value: bytes | None) -> tuple[int, int, int] | None:
    """(producer id, sequence, intended send ns), or None for a value dimster did not write."""
    if value is None or len(value) < HEADER_SIZE or value[:2] != MAGIC or value[2] != VERSION:
        return None
    _, _, producer_id, sequence, intended_ns = HEADER.unpack_from(value)
    return producer_id, sequence, intended_ns


@functools.cache
def header_array() -> np.dtype:
    """HEADER's layout as a numpy type, for reading many headers at once."""
    import numpy as np

    return np.dtype(HEADER_FIELDS)


def unpack_headers(headers: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Many headers at once, from HEADER_SIZE bytes per value (zero-filled where a value is shorter):
    (a mask of the values dimster wrote, their headers as a structured array of header_array())."""
    import numpy as np

    records = np.frombuffer(headers, dtype=header_array())
    return (records["magic"] == MAGIC) & (records["version"] == VERSION), records


def body_intact(body: bytes) -> bool:
    """A checksummed body (see make_bodies) whose bytes are as the producer wrote them."""
    return len(body) >= CHECKSUM.size and CHECKSUM.unpack_from(body)[0] == zlib.crc32(body[CHECKSUM.size :])


# A producer that compresses rotates through more distinct bodies than a batch holds: a codec then
# finds only the repeats a COMPRESSIBLE body has inside itself, whatever the batch size (librdkafka's
# batch.size is 1 MB by default; the Java producer fills a batch.size of compressed bytes, several
# times that raw). One that does not compress needs few.
FEW_BODIES = 16
DISTINCT_BYTES = 2_000_000
MAX_BODIES = 65_536


def body_count(message_size: int, compressed: bool, batch_size: int | None = None) -> int:
    """How many distinct bodies a producer of `message_size` records rotates through."""
    if not compressed:
        return FEW_BODIES
    wanted = max(DISTINCT_BYTES, 16 * (batch_size or 0))
    return max(FEW_BODIES, min(MAX_BODIES, -(-wanted // max(message_size, 1))))


def make_bodies(
    size: int,
    kind: str,
    compressible_ratio: float,
    count: int = FEW_BODIES,
    seed: int | None = None,
    checksum: bool = False,
    zeros: bool = False,
    data: bytes = b"",
) -> list[bytes]:
    """`count` bodies of `size - HEADER_SIZE` bytes to rotate through. COMPRESSIBLE bodies have
    `compressible_ratio` of their bytes as a repeated pattern and the rest random; with `zeros` the
    random part comes first and the rest is zero bytes (OpenMessaging Benchmark's randomBytesRatio).
    FILE is one body: `data` (a whole value) after the header. With `checksum`, each body's first 4
    bytes are the CRC-32 of its other bytes, so a consumer can tell it intact."""
    if kind == "FILE":
        return [data[HEADER_SIZE:size]]
    if checksum:
        rest = make_bodies(size - CHECKSUM.size, kind, compressible_ratio, count, seed, zeros=zeros)
        return [CHECKSUM.pack(zlib.crc32(body)) + body for body in rest]
    length = max(0, size - HEADER_SIZE)
    rng = random.Random(seed)
    bodies = []
    for _ in range(count):
        if kind == "RANDOM":
            bodies.append(os.urandom(length) if seed is None else rng.randbytes(length))
            continue
        repeated = int(length * compressible_ratio)
        if zeros:
            bodies.append(rng.randbytes(length - repeated) + bytes(repeated))
            continue
        pattern = b"dimster-compressible-payload "
        filler = (pattern * (repeated // len(pattern) + 1))[:repeated]
        bodies.append(filler + rng.randbytes(length - repeated))
    return bodies


def with_file_data(doc: dict, folders: Sequence[Path], source: str) -> dict:
    """The workload document with `payload.data`, the base64 of the whole file `payload.file`, filled
    in when absent: a relative path is looked for in each of `folders` in turn."""
    payload = doc.get("payload")
    if not isinstance(payload, dict) or not isinstance(payload.get("file"), str) or payload.get("data") is not None:
        return doc
    name = payload["file"]
    places = [Path(name)] if Path(name).is_absolute() else [folder / name for folder in folders]
    found = next((place for place in places if place.is_file()), None)
    if found is None:
        looked = ", ".join(display(place.parent) for place in places)
        raise DimsterError(f"{source}: payload.file {name} does not exist (looked in {looked})")
    try:
        data = found.read_bytes()
    except OSError as e:
        raise DimsterError(f"{source}: payload.file {name}: cannot read {display(found)}: {e.strerror}") from None
    return {**doc, "payload": {**payload, "data": base64.b64encode(data).decode()}}
