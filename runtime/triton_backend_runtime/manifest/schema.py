"""A small codec between typed dataclasses and JSON, and a JSON Schema generator.

The manifest is defined once, as dataclasses in :mod:`triton_backend_runtime.manifest.model`.
Everything else is derived from those definitions by this module: strict decoding of
JSON values, deterministic encoding, and the JSON Schema (draft 2020-12) that
``backend-packager schema`` prints. Keeping the three derived from one definition is what
stops the build side and the load side from drifting apart.

Decoding is strict about types (``true`` is not an integer, ``1`` is not a string) and
lenient about unknown object keys, which are ignored so that a reader accepts any minor
version of its own major. A string field annotated with :class:`MaxLength` is refused
above it when decoding, and the JSON Schema states it (``maxLength``); a list field annotated
with :class:`MaxItems` is refused above it before any of its items is decoded (code
``limit``, naming the cap), and the JSON Schema states it (``maxItems``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar, Union

from ..base import ManifestError, record

__all__ = ["Decoder", "MaxItems", "MaxLength", "T", "decode", "encode", "json_schema"]

T = TypeVar("T")


@record(frozen=True)
class MaxLength:
    """``Annotated[str | None, MaxLength(n), "doc"]``: at most ``n`` characters (JSON Schema
    ``maxLength``, which also counts characters)."""

    chars: int


@record(frozen=True)
class MaxItems:
    """``Annotated[list[T], MaxItems(n, "MAX_X"), "doc"]``: at most ``n`` items (JSON Schema
    ``maxItems``); ``cap`` names the constant, so that a refusal says which cap it met."""

    items: int
    cap: str

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
    try:
        result: T = _decoder(cls, complete)(value)
    except _Invalid as exc:
        raise ManifestError(exc.code, where + "".join(reversed(exc.parts)), exc.detail) from None
    return result


class _Invalid(Exception):
    """A value that does not fit; each enclosing level adds its key on the way out, so the
    location is built only when something is wrong (building it per value cost ~40 %)."""

    def __init__(self, detail: str, code: str = "schema") -> None:
        super().__init__(detail)
        self.detail = detail
        self.code = code
        self.parts: list[str] = []


Decoder = Callable[[Any], Any]
#: One decoder per (type, complete), built once from the type hints: decoding a manifest of
#: 10,000 symbols then costs a call per value, not a walk of the typing machinery per value.
_DECODERS: dict[tuple[Any, bool], Decoder] = {}


def _decoder(tp: Any, complete: bool) -> Decoder:
    key = (tp, complete)
    found = _DECODERS.get(key)
    if found is None:
        slot: list[Decoder] = []
        _DECODERS[key] = lambda value: slot[0](value)  # a type that refers to itself finds this
        found = _build(tp, complete)
        slot.append(found)
        _DECODERS[key] = found
    return found


def _build(tp: Any, complete: bool) -> Decoder:
    optional, inner = _is_optional(tp)
    if optional:
        return _optional(_decoder(inner, complete))
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _object(typing.cast(type, tp), complete)
    if origin is list:
        return _array(_decoder(typing.get_args(tp)[0], complete), typing.get_args(tp)[0] is str)
    if origin is dict:
        return _mapping(_decoder(typing.get_args(tp)[1], complete))
    if origin is Literal:
        return _literal(typing.get_args(tp))
    if tp in (bool, int, str):
        return _scalar(tp)
    raise TypeError(f"unsupported schema type {tp!r}")


def _optional(inner: Decoder) -> Decoder:
    return lambda value: None if value is None else inner(value)


def _scalar(tp: type) -> Decoder:
    # type() is not isinstance(): bool is an int in Python but not in JSON.
    def decode(value: Any) -> Any:
        if type(value) is not tp:
            raise _Invalid(f"expected {_json_type(tp)}, found {_type_name(value)}")
        return value

    return decode


def _literal(allowed: tuple[Any, ...]) -> Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, str) or value not in allowed:
            raise _Invalid(f"expected one of {list(allowed)}, found {value!r}")
        return value

    return decode


def _array(item: Decoder, strings: bool) -> Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, list):
            raise _Invalid(f"expected an array, found {_type_name(value)}")
        if strings and all(type(v) is str for v in value):
            return list(value)  # names and paths: checked without a call per item
        out = []
        for index, element in enumerate(value):
            try:
                out.append(item(element))
            except _Invalid as exc:
                exc.parts.append(f"[{index}]")
                raise
        return out

    return decode


def _mapping(item: Decoder) -> Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _Invalid(f"expected an object, found {_type_name(value)}")
        out = {}
        for key, element in value.items():
            try:
                out[str(key)] = item(element)
            except _Invalid as exc:
                exc.parts.append(f".{key}")
                raise
        return out

    return decode


def _object(cls: type, complete: bool) -> Decoder:
    hints = _hints(cls)
    bounds = {name: (_max_length(tp), _max_items(tp)) for name, tp in _hints(cls, extras=True).items()}
    fields = [
        (f.name, _bounded(_decoder(hints[f.name], complete), *bounds.get(f.name, (None, None))),
         complete or (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING),
         *_plain(hints[f.name], bounds.get(f.name, (None, None))))
        for f in dataclasses.fields(cls)
    ]

    # An object of plain fields only (a symbol, an import: 11,000 of them in Triton's manifest)
    # given with exactly its fields, each of its type, is built from the value as it is.
    scalars = tuple((name, plain, nullable) for name, _, _, plain, nullable in fields) \
        if all(plain is not None for *_, plain, _ in fields) else None

    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _Invalid(f"expected an object, found {_type_name(value)}")
        if scalars is not None and len(value) == len(scalars):
            for name, plain, nullable in scalars:
                item = value.get(name, _Invalid)  # absent: a class, never a value's type
                if type(item) is not plain and not (nullable and item is None):
                    break
            else:
                return cls(**value)
        kwargs = {}
        for name, field_decoder, required, plain, nullable in fields:
            if name in value:
                item = value[name]
                if type(item) is plain or (item is None and nullable):  # most values: no call
                    kwargs[name] = item
                    continue
                try:
                    kwargs[name] = field_decoder(item)
                except _Invalid as exc:
                    exc.parts.append(f".{name}")
                    raise
            elif required:
                raise _Invalid(f"missing required field {name!r}")
        return cls(**kwargs)

    return decode


def _plain(tp: Any, bounds: tuple[int | None, MaxItems | None]) -> tuple[type | None, bool]:
    """The scalar type (bool, int, str) a field's value is taken as it is when it has exactly that
    type (or is null, where the field is optional), and whether null is; (None, False) for any
    other field, or a bounded one: its decoder decides."""
    optional, inner = _is_optional(tp)
    if inner in (bool, int, str) and bounds == (None, None):
        return inner, optional
    return None, False


def _max_length(tp: Any) -> int | None:
    if typing.get_origin(tp) is not Annotated:
        return None
    return next((m.chars for m in typing.get_args(tp)[1:] if isinstance(m, MaxLength)), None)


def _max_items(tp: Any) -> MaxItems | None:
    if typing.get_origin(tp) is not Annotated:
        return None
    return next((m for m in typing.get_args(tp)[1:] if isinstance(m, MaxItems)), None)


def _bounded(decoder: Decoder, chars: int | None, items: MaxItems | None = None) -> Decoder:
    if chars is None and items is None:
        return decoder

    def decode(value: Any) -> Any:
        if chars is not None and isinstance(value, str) and len(value) > chars:
            raise _Invalid(f"a string of {len(value):,} characters; the limit is {chars:,}")
        if items is not None and isinstance(value, list) and len(value) > items.items:
            raise _Invalid(f"{len(value):,} items; the limit is {items.items:,} ({items.cap})", "limit")
        return decoder(value)

    return decode


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


def _string_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """The ``{"type": "string"}`` part of a string or optional-string schema."""
    return next((p for p in prop.get("anyOf", []) if p.get("type") == "string"), prop)


def _object_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    hints = _hints(cls, extras=True)
    props: dict[str, Any] = {}
    required: list[str] = []
    for field in dataclasses.fields(cls):
        tp = hints[field.name]
        if typing.get_origin(tp) is Annotated:
            tp, *extras = typing.get_args(tp)
            prop = _schema_for(tp, defs)
            chars = _max_length(hints[field.name])
            if chars is not None:
                _string_schema(prop)["maxLength"] = chars
            items = _max_items(hints[field.name])
            if items is not None:
                prop["maxItems"] = items.items
            prop.update(("description", doc) for doc in extras if isinstance(doc, str))
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
