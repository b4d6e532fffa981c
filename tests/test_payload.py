"""Message values: the header round trip, values dimster did not write, and body sizes and
compressibility."""

import struct
import zlib

import pytest

from dimster.workload.payload import (
    HEADER_SIZE,
    MAGIC,
    MAX_BODIES,
    body_count,
    make_bodies,
    pack_header,
    unpack_header,
)

pytestmark = pytest.mark.unit


def compressed_share(body: bytes) -> float:
    return len(zlib.compress(body, 6)) / len(body)


# header


def test_header_size_is_fixed():
    assert HEADER_SIZE == 23
    assert len(pack_header(1, 2, 3)) == HEADER_SIZE
    assert pack_header(1, 2, 3).startswith(MAGIC)


@pytest.mark.parametrize(
    ("producer_id", "sequence", "intended_ns"),
    [
        (0, 0, 0),
        (7, 123_456, 1_700_000_000_123_456_789),
        (2**32 - 1, 2**64 - 1, 2**63 - 1),
        (3, 1, -5),  # a clock before the epoch still round-trips
    ],
)
def test_header_round_trip(producer_id, sequence, intended_ns):
    assert unpack_header(pack_header(producer_id, sequence, intended_ns)) == (producer_id, sequence, intended_ns)


def test_header_followed_by_a_body():
    body = make_bodies(1024, "RANDOM", 0.0, count=1, seed=1)[0]
    value = pack_header(9, 42, 1234) + body
    assert len(value) == 1024
    assert unpack_header(value) == (9, 42, 1234)
    assert unpack_header(bytearray(value)) == (9, 42, 1234)


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"",
        b"hello",
        b"x" * 100,
        b'{"order": 17, "amount": 12.5}',
        b"DM" + b"\x01" * 10,  # our magic but too short
        b"DMARC aggregate report for example.org",  # starts with the magic by chance
        b"DM\x02" + bytes(40),  # a future header version is not read as this one
    ],
    ids=["none", "empty", "short", "text", "json", "truncated", "magic-by-chance", "other-version"],
)
def test_foreign_values_give_none(value):
    assert unpack_header(value) is None


def test_truncated_header_gives_none():
    assert unpack_header(pack_header(1, 2, 3)[:-1]) is None


def test_out_of_range_fields_are_refused_when_packing():
    with pytest.raises(struct.error):
        pack_header(2**32, 0, 0)
    with pytest.raises(struct.error):
        pack_header(0, -1, 0)


# bodies


@pytest.mark.parametrize("kind", ["RANDOM", "COMPRESSIBLE"])
@pytest.mark.parametrize("size", [HEADER_SIZE, HEADER_SIZE + 1, 100, 1024, 65_536])
def test_body_sizes_leave_room_for_the_header(kind, size):
    bodies = make_bodies(size, kind, 0.5, seed=3)
    assert len(bodies) == 16
    assert {len(b) for b in bodies} == {size - HEADER_SIZE}


def test_message_smaller_than_header_gives_empty_bodies():
    assert make_bodies(5, "RANDOM", 0.5, count=2) == [b"", b""]


def test_body_count():
    assert len(make_bodies(100, "RANDOM", 0.0, count=3)) == 3
    assert len(make_bodies(100, "COMPRESSIBLE", 0.5, count=40, seed=1)) == 40


@pytest.mark.parametrize("kind", ["RANDOM", "COMPRESSIBLE"])
def test_bodies_differ_from_each_other(kind):
    bodies = make_bodies(1024, kind, 0.5, seed=5)
    assert len(set(bodies)) == len(bodies)


@pytest.mark.parametrize("kind", ["RANDOM", "COMPRESSIBLE"])
def test_seed_makes_bodies_reproducible(kind):
    assert make_bodies(512, kind, 0.3, seed=11) == make_bodies(512, kind, 0.3, seed=11)
    assert make_bodies(512, kind, 0.3, seed=11) != make_bodies(512, kind, 0.3, seed=12)


def test_unseeded_random_bodies_differ_between_calls():
    assert make_bodies(512, "RANDOM", 0.0, count=2) != make_bodies(512, "RANDOM", 0.0, count=2)


def test_random_bodies_do_not_compress():
    for body in make_bodies(16_384, "RANDOM", 0.9, count=4):  # the ratio is ignored for RANDOM
        assert compressed_share(body) > 0.98


def test_compressible_bodies_compress_much_better_than_random_ones():
    random_share = compressed_share(b"".join(make_bodies(16_384, "RANDOM", 0.0, count=4, seed=1)))
    compressible_share = compressed_share(b"".join(make_bodies(16_384, "COMPRESSIBLE", 0.7, count=4, seed=1)))
    assert compressible_share < random_share / 2


@pytest.mark.parametrize("ratio", [0.0, 0.25, 0.5, 0.75, 0.9, 1.0])
def test_compressible_ratio_is_respected(ratio):
    """A body whose `ratio` of bytes repeat compresses to about the random rest."""
    for body in make_bodies(20_000 + HEADER_SIZE, "COMPRESSIBLE", ratio, count=3, seed=2):
        assert compressed_share(body) == pytest.approx(1 - ratio, abs=0.03)


def test_compressible_body_layout():
    (body,) = make_bodies(HEADER_SIZE + 1000, "COMPRESSIBLE", 0.4, count=1, seed=0)
    pattern = b"dimster-compressible-payload "
    assert body[:400] == (pattern * 14)[:400]
    assert pattern not in body[400:]


@pytest.mark.parametrize(("size", "batch_size"), [(1024, None), (1024, 1_000_000), (100, 16_384), (HEADER_SIZE, None)])
def test_a_producer_rotates_through_more_bodies_than_a_batch_holds(size, batch_size):
    """When it compresses, so that a codec finds only the repeats inside each COMPRESSIBLE body, not
    whole bodies again."""
    assert body_count(size, compressed=False, batch_size=batch_size) == 16  # nothing to find: few bodies
    count = body_count(size, compressed=True, batch_size=batch_size)
    raw_batch = max(1_000_000, 16 * (batch_size or 0))  # librdkafka's default; a Java batch of compressed bytes, raw
    assert count == MAX_BODIES or count * size >= raw_batch
    assert count >= 16
