"""Typed values as plain msgpack data and back, converted by their type hints: dataclasses, lists,
tuples, dicts, optionals and plain values. The protocol's messages (protocol.py) travel so."""

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from typing import Any

REQUIRED = object()  # a field without a default: always on the wire


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return REQUIRED


@functools.cache
def _typed_fields(cls) -> tuple[tuple[str, typing.Any, Any], ...]:
    """A message type's fields with their type hints and defaults (REQUIRED where none)."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name], _default(f)) for f in dataclasses.fields(cls))


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
    pairs; tuples go as lists."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        fields = [(name, _encoder(field_hint), default) for name, field_hint, default in _typed_fields(hint)]

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


@functools.cache
def _decoder(hint) -> Callable[[Any], Any]:
    """The inverse of `_encoder(hint)`, which checks the type of every plain value."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        fields = [(name, _decoder(field_hint)) for name, field_hint, _default in _typed_fields(hint)]
        return _optional(
            lambda data: hint(**{name: decode_field(data[name]) for name, decode_field in fields if name in data})
        )
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _optional(_decoder(next(a for a in args if a is not type(None))))
    if origin is list:
        item = _decoder(args[0])
        return _optional(lambda data: [item(v) for v in data])
    if origin is tuple:
        items = [_decoder(a) for a in args]
        return _optional(lambda data: tuple(convert(v) for convert, v in zip(items, data, strict=True)))
    if origin is dict:
        key, item = _decoder(args[0]), _decoder(args[1])
        if args[0] in (str, int):  # a msgpack map, as _encoder sends it
            return _optional(lambda data: {key(k): item(v) for k, v in data.items()})
        return _optional(lambda data: {key(k): item(v) for k, v in data})
    if hint is float:
        return _optional(_float)
    if hint in (int, str, bool, bytes):
        return _optional(lambda data: data if isinstance(data, hint) else _wrong_type(hint, data))
    return _same


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
