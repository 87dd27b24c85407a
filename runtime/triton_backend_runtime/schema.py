"""A small codec between typed dataclasses and JSON, and a JSON Schema generator.

The manifest is defined once, as dataclasses in :mod:`triton_backend_runtime.manifest`.
Everything else is derived from those definitions by this module: strict decoding of
JSON values, deterministic encoding, and the JSON Schema (draft 2020-12) that
``backend-packager schema`` prints. Keeping the three derived from one definition is what
stops the build side and the load side from drifting apart.

Decoding is strict about types (``true`` is not an integer, ``1`` is not a string) and
lenient about unknown object keys, which are ignored so that a reader accepts any minor
version of its own major.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Annotated, Any, Literal, TypeVar, Union

from .errors import ManifestError

T = TypeVar("T")

_HINTS: dict[tuple[type, bool], dict[str, Any]] = {}


def _hints(cls: type, extras: bool = False) -> dict[str, Any]:
    """Field types; with ``extras``, ``Annotated[T, "doc"]`` is kept for its doc string."""
    # get_type_hints evaluates string annotations; cache it, it is not cheap.
    hints = _HINTS.get((cls, extras))
    if hints is None:
        hints = typing.get_type_hints(cls, include_extras=extras)
        _HINTS[(cls, extras)] = hints
    return hints


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return True, args[0]
    return False, tp


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def decode(cls: type[T], value: Any, where: str = "$", *, complete: bool = False) -> T:
    """Build an instance of dataclass ``cls`` from a decoded JSON value, strictly.

    ``complete`` requires every field, defaults included: for data this package wrote
    itself (a cache), where a missing key means the data is not what was written.
    """
    result: T = _decode(cls, value, where, complete)
    return result


def _decode(tp: Any, value: Any, where: str, complete: bool = False) -> Any:
    optional, inner = _is_optional(tp)
    if optional:
        return None if value is None else _decode(inner, value, where, complete)
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _decode_object(tp, value, where, complete)  # type: ignore[arg-type]
    if origin is list:
        if not isinstance(value, list):
            raise ManifestError("schema", where, f"expected an array, found {_type_name(value)}")
        (item,) = typing.get_args(tp)
        if item is str and all(type(v) is str for v in value):
            return list(value)  # the common case (names, paths), checked without a call per item
        return [_decode(item, v, f"{where}[{i}]", complete) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ManifestError("schema", where, f"expected an object, found {_type_name(value)}")
        _, item = typing.get_args(tp)
        return {str(k): _decode(item, v, f"{where}.{k}", complete) for k, v in value.items()}
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed or not isinstance(value, str):
            raise ManifestError("schema", where, f"expected one of {list(allowed)}, found {value!r}")
        return value
    return _decode_scalar(tp, value, where)


def _decode_scalar(tp: Any, value: Any, where: str) -> Any:
    # bool is a subclass of int in Python but not in JSON: check it explicitly.
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is str:
        ok = isinstance(value, str)
    else:
        raise TypeError(f"unsupported schema type {tp!r}")
    if not ok:
        raise ManifestError("schema", where, f"expected {_json_type(tp)}, found {_type_name(value)}")
    return value


def _decode_object(cls: type, value: Any, where: str, complete: bool) -> Any:
    if not isinstance(value, dict):
        raise ManifestError("schema", where, f"expected an object, found {_type_name(value)}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name in value:
            kwargs[field.name] = _decode(hints[field.name], value[field.name], f"{where}.{field.name}", complete)
        elif complete or (field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING):
            raise ManifestError("schema", where, f"missing required field {field.name!r}")
    return cls(**kwargs)


def encode(obj: Any) -> Any:
    """Turn a dataclass tree into plain JSON values (dicts, lists, scalars)."""
    # Scalars first: they are most of a manifest (symbol names), and this runs per value.
    if obj is None or isinstance(obj, str | int | float):
        return obj
    if isinstance(obj, list | tuple):
        return [encode(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        # vars() holds exactly the fields, in declaration order, for these plain dataclasses.
        return {name: encode(value) for name, value in vars(obj).items()}
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


def _json_type(tp: Any) -> str:
    return {bool: "boolean", int: "integer", str: "string"}[tp]


def json_schema(root: type, *, schema_id: str, title: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) describing dataclass ``root`` and all it contains."""
    defs: dict[str, Any] = {}
    body = _schema_for(root, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": title,
        **body,
        "$defs": dict(sorted(defs.items())),
    }


def _schema_for(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    optional, inner = _is_optional(tp)
    if optional:
        return {"anyOf": [_schema_for(inner, defs), {"type": "null"}]}
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        name = typing.cast(type, tp).__name__
        if name not in defs:
            defs[name] = {}  # placeholder first: dataclasses may nest recursively
            defs[name] = _object_schema(tp, defs)  # type: ignore[arg-type]
        return {"$ref": f"#/$defs/{name}"}
    if origin is list:
        return {"type": "array", "items": _schema_for(typing.get_args(tp)[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_for(typing.get_args(tp)[1], defs)}
    if origin is Literal:
        return {"enum": list(typing.get_args(tp))}
    return {"type": _json_type(tp)}


def _object_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    hints = _hints(cls, extras=True)
    props: dict[str, Any] = {}
    required: list[str] = []
    for field in dataclasses.fields(cls):
        tp = hints[field.name]
        if typing.get_origin(tp) is Annotated:
            tp, doc = typing.get_args(tp)[:2]
            prop = {**_schema_for(tp, defs), "description": doc}
        else:
            prop = _schema_for(tp, defs)
        props[field.name] = prop
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            required.append(field.name)
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if cls.__doc__:
        schema["description"] = " ".join(cls.__doc__.split())
    # Unknown keys are allowed: a reader accepts newer minors of its own major.
    schema["additionalProperties"] = True
    return schema
