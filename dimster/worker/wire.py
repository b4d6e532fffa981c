"""Typed values as plain msgpack data and back, converted by their type hints: dataclasses, lists,
tuples, dicts, optionals and plain values. The protocol's messages (protocol.py) travel so.

The bulk of a report, its sequence ranges and histograms, travels packed (`Ranges`, `Int64s`,
`Float64s`): one msgpack bin of little-endian values, made and read in one call (by the
array module into pairs, or by numpy into an array), where a Python call per value would cost the
coordinator a third of its time (docs/benchmarks.md)."""

import dataclasses
import functools
import sys
import types
import typing
from array import array
from collections.abc import Callable
from itertools import chain
from typing import Annotated, Any

import numpy as np

REQUIRED = object()  # a field without a default: always on the wire


@dataclasses.dataclass(frozen=True)
class Packed:
    """A type hint's mark: the value travels packed, and comes back `into` a list of int64 pairs
    (`Ranges`) or a read-only numpy array of `dtype` (`Int64s`, `Float64s`)."""

    into: type  # list | np.ndarray
    dtype: str = "<i8"  # an array's, little-endian


Ranges = Annotated[list[tuple[int, int]], Packed(list)]  # (first, last) sequence ranges
Int64s = Annotated[np.ndarray, Packed(np.ndarray)]
Float64s = Annotated[np.ndarray, Packed(np.ndarray, "<f8")]


def _pack(pairs) -> bytes:
    packed = array("q", chain.from_iterable(pairs))
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def _unpack(data) -> list[int]:
    if not isinstance(data, bytes):
        raise TypeError(f"expected packed int64 pairs, got {type(data).__name__}")
    if len(data) % 16:
        raise TypeError(f"packed int64 pairs of {len(data)} bytes, not a multiple of 16")
    values = array("q")
    values.frombytes(data)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


def _array(dtype: np.dtype, data) -> np.ndarray:
    if not isinstance(data, bytes):
        raise TypeError(f"expected packed {dtype.name} values, got {type(data).__name__}")
    if len(data) % dtype.itemsize:
        raise TypeError(f"packed {dtype.name} values of {len(data)} bytes, not a multiple of {dtype.itemsize}")
    return np.frombuffer(data, dtype)


def _packed(hint) -> Packed | None:
    if typing.get_origin(hint) is Annotated:
        return next((mark for mark in hint.__metadata__ if isinstance(mark, Packed)), None)
    return None


def _is_array(hint) -> bool:
    return (packed := _packed(hint)) is not None and packed.into is np.ndarray


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return REQUIRED


LOCAL = {"wire": False}  # a field's metadata: the receiving side's own, never on the wire


@functools.cache
def _typed_fields(cls) -> tuple[tuple[str, typing.Any, Any], ...]:
    """A message type's fields on the wire with their type hints and defaults (REQUIRED where none)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = [f for f in dataclasses.fields(cls) if f.metadata.get("wire", True)]
    return tuple((f.name, hints[f.name], _default(f)) for f in fields)


def to_wire(hint, value):
    """`value`, typed by `hint`, as plain msgpack data."""
    return _encoder(hint)(value)


def from_wire(hint, data):
    """The value typed by `hint` that `data` (from to_wire) stands for; TypeError where it is none."""
    return _decoder(hint)(data)


def _optional(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else convert(value)


@functools.cache
def _encoder(hint) -> Callable[[Any], Any]:
    """The function that turns a value typed by `hint` into plain msgpack data, built once per type (a
    report carries hundreds of clients' intervals every second). A field equal to its default stays off
    the wire (the decoder restores it): most of a client's counters are 0 in most intervals. A map
    keyed by strings or ints goes as a msgpack map, one with other keys as a list of [key, value]
    pairs; tuples go as lists; `Ranges` and arrays packed."""
    if (packed := _packed(hint)) is not None:
        if packed.into is np.ndarray:
            return _optional(lambda value: np.ascontiguousarray(value, packed.dtype).tobytes())
        return _optional(_pack)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        fields = [
            (name, _encoder(field_hint), REQUIRED if _is_array(field_hint) else default)  # no array == its default
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
            return _same  # msgpack packs a tuple as a list itself
        return _optional(lambda value: [convert(v) for convert, v in zip(items, value, strict=True)])
    if origin is dict:
        key, item = _encoder(args[0]), _encoder(args[1])
        if args[0] in (str, int):
            return _same if item is _same else _optional(lambda value: {k: item(v) for k, v in value.items()})
        return _optional(lambda value: [[key(k), item(v)] for k, v in value.items()])
    return _same  # int, float, str, bool, bytes, or an untyped dict of plain data


PLAIN = (int, str, bool, bytes)  # taken as msgpack gives them, their type checked


@functools.cache
def _decoder(hint) -> Callable[[Any], Any]:
    """The inverse of `_encoder(hint)`, which checks the type of every plain value. None is taken only
    where the hint is optional."""
    if (packed := _packed(hint)) is not None:
        if packed.into is np.ndarray:
            return functools.partial(_array, np.dtype(packed.dtype))

        def unpack(data):
            values = iter(_unpack(data))
            return list(zip(values, values, strict=True))

        return unpack
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _optional(_decoder(next(a for a in args if a is not type(None))))
    if origin is list:
        item = _decoder(args[0])
        return lambda data: [item(v) for v in data]
    if origin is tuple:
        if all(a in PLAIN for a in args):  # checked in one pass, no call per value
            return lambda data: tuple(data) if _plain(data, args) else _wrong_type(hint, data)
        items = [_decoder(a) for a in args]
        return lambda data: tuple([convert(v) for convert, v in zip(items, data, strict=True)])
    if origin is dict:
        key, item = _decoder(args[0]), _decoder(args[1])
        if args[0] in (str, int):  # a msgpack map, as _encoder sends it
            return lambda data: {key(k): item(v) for k, v in _map(data).items()}
        return lambda data: {key(k): item(v) for k, v in data}
    if hint is float:
        return _float
    if hint in PLAIN:
        return lambda data: data if isinstance(data, hint) else _wrong_type(hint, data)
    return _same


def _dataclass_decoder(hint) -> Callable[[Any], Any]:
    """A message's fields by name: plain ones type-checked in place, the others converted; a name the
    message does not have is a KeyError."""
    plain = {name: field_hint for name, field_hint, _ in _typed_fields(hint) if field_hint in PLAIN}
    others = {name: _decoder(field_hint) for name, field_hint, _ in _typed_fields(hint) if name not in plain}

    def decode_dataclass(data):
        if not isinstance(data, dict):
            _wrong_type(dict, data)
        fields = {}
        for name, value in data.items():
            kind = plain.get(name)
            if kind is None:
                fields[name] = others[name](value)
            elif isinstance(value, kind):
                fields[name] = value
            else:
                _wrong_type(kind, value)
        return hint(**fields)

    return decode_dataclass


def _map(data) -> dict:
    return data if isinstance(data, dict) else _wrong_type(dict, data)


def _plain(data, kinds: tuple[type, ...]) -> bool:
    return len(data) == len(kinds) and all(map(isinstance, data, kinds))


def _same(value):
    return value


def _float(data):
    if isinstance(data, float):
        return data
    if isinstance(data, int):
        return float(data)
    return _wrong_type(float, data)


def _wrong_type(hint, data):
    raise TypeError(f"expected {hint.__name__}, got {type(data).__name__}")
