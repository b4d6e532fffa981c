"""Typed values as plain msgpack data and back: dataclasses, lists, tuples, dicts, optionals and plain
values. The protocol's messages (protocol.py) travel so.

Encoding is ours (`to_wire`): a field at its default stays off the wire, and the bulk of a report,
its sequence ranges and histograms, travels packed (`Ranges`, `Int64s`, `Float64s`): one msgpack bin
of little-endian values. Decoding is msgspec's (`from_bytes`, `from_wire`): it builds the typed
dataclasses in C from the type hints, checking every value's type, and hands the packed bins to
`_unpacked`, which reads each in one call (docs/design.md, docs/benchmarks.md)."""

import dataclasses
import functools
import struct
import sys
import types
import typing
from array import array
from collections.abc import Callable
from itertools import chain
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

if TYPE_CHECKING:
    Ranges = list[tuple[int, int]]  # (first, last) sequence ranges
    Int64s = np.ndarray
    Float64s = np.ndarray
else:

    class Ranges(list):
        """(first, last) sequence ranges; on the wire one bin of little-endian int64 pairs."""

    class Int64s(np.ndarray):
        """A read-only int64 array; on the wire one bin of its little-endian values."""

    class Float64s(np.ndarray):
        """A read-only float64 array; on the wire one bin of its little-endian values."""


DTYPES: dict[type, np.dtype] = {Int64s: np.dtype("<i8"), Float64s: np.dtype("<f8")}
REQUIRED = object()  # a field without a default: always on the wire
ONE_PAIR = struct.Struct("<qq")


def _pack(pairs) -> bytes:
    packed = array("q", chain.from_iterable(pairs))
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def _unpacked(kind: type, data: Any) -> Any:
    """msgspec's hook for the packed types: a bin read back in one call, anything else a TypeError."""
    if kind is Ranges:
        if not isinstance(data, bytes) or len(data) % 16:
            raise TypeError("expected packed int64 pairs (a bin of a multiple of 16 bytes)")
        if len(data) == 16:  # the usual case: a consumer's records of a producer in an interval, one run
            return Ranges((ONE_PAIR.unpack(data),))
        pairs = iter(struct.unpack(f"<{len(data) // 8}q", data))
        return Ranges(zip(pairs, pairs, strict=True))
    if (dtype := DTYPES.get(kind)) is not None:
        if not isinstance(data, bytes) or len(data) % dtype.itemsize:
            raise TypeError(f"expected packed {dtype.name} values (a bin of a multiple of {dtype.itemsize} bytes)")
        return np.frombuffer(data, dtype).view(kind)
    raise NotImplementedError(f"no wire form for {kind.__name__}")


LOCAL = {"wire": False}  # a field's metadata: the receiving side's own, never on the wire


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return REQUIRED


@functools.cache
def _typed_fields(cls) -> tuple[tuple[str, typing.Any, Any], ...]:
    """A message type's fields on the wire with their type hints and defaults (REQUIRED where none)."""
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.metadata.get("wire", True)]
    return tuple((f.name, hints[f.name], _default(f)) for f in fields)


def to_wire(hint, value):
    """`value`, typed by `hint`, as plain msgpack data."""
    return _encoder(hint)(value)


def from_wire(hint, data):
    """The value typed by `hint` that `data` (from to_wire, as plain Python data) stands for; a
    msgspec.ValidationError where it is none."""
    return msgspec.convert(data, hint, dec_hook=_unpacked)


def from_bytes(hint, data: bytes | memoryview):
    """The value typed by `hint` that msgpack `data` (to_wire's, packed) stands for; a
    msgspec.DecodeError (or its ValidationError) where it is none."""
    return _decoder(hint).decode(data)


@functools.cache
def _decoder(hint) -> msgspec.msgpack.Decoder:
    return msgspec.msgpack.Decoder(hint, dec_hook=_unpacked)


def _optional(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else convert(value)


@functools.cache
def _encoder(hint) -> Callable[[Any], Any]:
    """The function that turns a value typed by `hint` into plain msgpack data, built once per type (a
    report carries hundreds of clients' intervals every second). A field equal to its default stays off
    the wire (the decoder restores it): most of a client's counters are 0 in most intervals. Maps go as
    msgpack maps (a tuple key as an array), tuples as lists, `Ranges` and arrays packed."""
    if hint is Ranges:
        return _optional(_pack)
    if (dtype := DTYPES.get(hint)) is not None:
        return _optional(lambda value: np.ascontiguousarray(value, dtype).tobytes())
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        fields = [
            (name, _encoder(field_hint), REQUIRED if field_hint in DTYPES else default)  # no array == its default
            for name, field_hint, default in _typed_fields(hint)
        ]

        def encode_dataclass(value) -> dict:
            wire = {}
            for name, encode_field, default in fields:
                field_value = getattr(value, name)
                if default is REQUIRED or field_value != default:
                    wire[name] = encode_field(field_value)
            return wire

        return _optional(encode_dataclass)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _optional(_encoder(next(a for a in args if a is not type(None))))
    if origin is list:
        item = _encoder(args[0])
        return _same if item is _same else _optional(lambda value: [item(v) for v in value])
    if origin is tuple:
        items = [_encoder(a) for a in args]
        if all(convert is _same for convert in items):
            return _same  # msgpack packs a tuple as an array itself
        return _optional(lambda value: [convert(v) for convert, v in zip(items, value, strict=True)])
    if origin is dict:
        if _encoder(args[0]) is not _same:
            raise TypeError(f"a map's keys must be plain values or tuples of them, not {args[0]}")
        item = _encoder(args[1])
        return _same if item is _same else _optional(lambda value: {k: item(v) for k, v in value.items()})
    return _same  # int, float, str, bool, bytes, or an untyped dict of plain data


def _same(value):
    return value
