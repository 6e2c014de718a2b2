"""Exact dict/JSON round-trip for the frozen dataclasses used by config and trace records.

Records are typed frozen dataclasses, never string-keyed dicts (docs/ARCHITECTURE.md). To store, diff and replay them
we need ``to_dict(record)`` and ``from_dict(cls, data)`` that are exact inverses: tuples come back as tuples,
nested records as records, ``Optional`` fields as ``None``. The type hints drive the decoding, so a record
only has to be a dataclass whose fields are built from: ``str``, ``int``, ``float``, ``bool``, ``None``,
``Literal[...]``, ``tuple[X, ...]``, ``tuple[X, Y]``, ``dict[str, X]``, ``X | None`` and other such dataclasses.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints


def to_dict(record: Any) -> Any:
    """Turn a dataclass (or a nest of them) into JSON-compatible builtins."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {f.name: to_dict(getattr(record, f.name)) for f in dataclasses.fields(record)}
    if isinstance(record, (tuple, list)):
        return [to_dict(item) for item in record]
    if isinstance(record, dict):
        return {str(key): to_dict(value) for key, value in record.items()}
    return record


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def from_dict(cls: Any, data: Any) -> Any:
    """Rebuild a value of type ``cls`` from what :func:`to_dict` produced.

    Unknown keys are ignored (records may grow keys; old JSON still loads) and missing keys take the
    field's default, so traces written by an older version stay readable.
    """
    return _decode(cls, data, path=getattr(cls, "__name__", str(cls)))


def _decode(tp: Any, value: Any, path: str) -> Any:
    if tp is Any:
        return value
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        options = get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _decode(option, value, path)
            except (TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise TypeError(f"{path}: {value!r} matches none of {options}: {'; '.join(errors)}")
    if origin is Literal:
        if value not in get_args(tp):
            raise ValueError(f"{path}: {value!r} is not one of {get_args(tp)}")
        return value
    if origin is tuple:
        args = get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{path}: expected a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], item, f"{path}[{i}]") for i, item in enumerate(value))
        if len(args) != len(value):
            raise ValueError(f"{path}: expected {len(args)} items, got {len(value)}")
        return tuple(_decode(arg, item, f"{path}[{i}]") for i, (arg, item) in enumerate(zip(args, value, strict=True)))
    if origin is dict:
        _, value_type = get_args(tp)
        if not isinstance(value, dict):
            raise TypeError(f"{path}: expected an object, got {type(value).__name__}")
        return {key: _decode(value_type, item, f"{path}.{key}") for key, item in value.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise TypeError(f"{path}: expected an object for {tp.__name__}, got {type(value).__name__}")
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                kwargs[f.name] = _decode(hints[f.name], value[f.name], f"{path}.{f.name}")
        return tp(**kwargs)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise TypeError(f"{path}: expected true/false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise TypeError(f"{path}: expected a string, got {value!r}")
        return value
    if tp is type(None):
        if value is not None:
            raise TypeError(f"{path}: expected null, got {value!r}")
        return None
    raise TypeError(f"{path}: unsupported field type {tp!r}")


__all__ = ["to_dict", "from_dict"]
