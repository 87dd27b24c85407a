"""Data classes whose methods are shared functions, not code compiled when a module is imported.

``@dataclasses.dataclass`` writes each class's ``__init__``, ``__repr__`` and ``__eq__`` (frozen:
also ``__setattr__``, ``__delattr__`` and ``__hash__``) as source text and compiles it with
``exec`` at import: 0.15 to 0.8 ms a class. Every ``import triton`` imports the runtime, and
declaring its classes that way cost a warm ``import triton`` of triton 3.9.0 about 40 million
instructions net: 872 M, now 832 M, against 736 M without the hook (callgrind; see
docs/development/performance.md).

:func:`record` makes the same class a dataclass (``dataclasses.fields``, ``asdict`` and
``replace`` work on it, and type checkers read it as one: PEP 681) and gives it methods that are
closures over its fields, so nothing is compiled. What it supports is what the runtime uses:
positional or keyword arguments, ``default`` and ``default_factory``, ``eq``, ``repr`` and
``frozen``; a field's own ``init``, ``repr`` and ``compare`` flags are honoured.
"""

from __future__ import annotations

import dataclasses
from operator import attrgetter

# Not typing.TYPE_CHECKING: see the layer's __init__ (typing is not imported at start-up).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform

    _T = TypeVar("_T", bound=type)
else:
    def dataclass_transform(**_options):
        return lambda function: function

__all__ = ["record"]


@dataclass_transform(field_specifiers=(dataclasses.field,))
def record(*, eq: bool = True, repr: bool = True, frozen: bool = False) -> Callable[[_T], _T]:
    """A class decorator with ``@dataclass``'s meaning for these options and none of its
    compiling. ``eq`` compares the fields (and makes the class unhashable unless ``frozen``);
    ``frozen`` refuses assignment after ``__init__`` and hashes the fields."""

    def make(cls: _T) -> _T:
        dataclasses.dataclass(init=False, repr=False, eq=False)(cls)  # the fields, no methods
        fields = dataclasses.fields(cls)
        compared = tuple(f.name for f in fields if f.compare)
        methods: dict[str, object] = {"__init__": _initializer(cls.__qualname__, fields)}
        if repr:
            methods["__repr__"] = _representer(tuple(f.name for f in fields if f.repr))
        if eq:
            methods["__eq__"] = _comparer(compared)
            methods["__hash__"] = _hasher(compared) if frozen else None
        if frozen:
            methods["__setattr__"], methods["__delattr__"] = _refuse_set, _refuse_delete
        for name, method in methods.items():
            setattr(cls, name, method)
        return cls

    return make


def _initializer(qualname: str, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    taken: tuple[tuple[str, Any, Any], ...] = tuple((f.name, f.default, f.default_factory) for f in fields if f.init)
    names = tuple(name for name, _, _ in taken)
    known = frozenset(names)
    unset: tuple[tuple[str, Any, Any], ...] = tuple((f.name, f.default, f.default_factory) for f in fields
                                                    if not f.init)
    missing = dataclasses.MISSING

    # Each value goes straight into the instance's __dict__, in field order (schema.encode
    # writes the keys in it): no call per field, and frozen classes are filled as
    # object.__setattr__ would fill them.
    def __init__(self: object, *args: object, **kwargs: object) -> None:
        values = self.__dict__
        if not args and len(kwargs) == len(names) and known.issuperset(kwargs):
            for name in names:  # every field by name: the decoders' call
                values[name] = kwargs[name]
        else:
            if len(args) > len(names):
                raise TypeError(f"{qualname}() takes {len(names)} positional arguments but {len(args)} were given")
            for name, value in zip(names, args, strict=False):  # fewer args than names: the rest follow
                values[name] = value
            used = 0
            for name, default, factory in taken[len(args):]:
                if name in kwargs:
                    values[name] = kwargs[name]
                    used += 1
                elif default is not missing:
                    values[name] = default
                elif factory is not missing:
                    values[name] = factory()
                else:
                    raise TypeError(f"{qualname}() missing required argument: {name!r}")
            if used != len(kwargs):  # a name not known, or one given by position too
                _refuse_arguments(qualname, names[:len(args)], known, kwargs)
        for name, default, factory in unset:
            values[name] = default if default is not missing else factory()

    return __init__


def _refuse_arguments(qualname: str, positional: tuple[str, ...], known: frozenset[str],
                      kwargs: dict[str, object]) -> None:
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise TypeError(f"{qualname}() got an unexpected keyword argument {unknown[0]!r}")
    twice = sorted(set(kwargs) & set(positional))
    raise TypeError(f"{qualname}() got multiple values for argument {twice[0]!r}")


def _values(names: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    """The named fields of an instance as one tuple (attrgetter gives a bare value for one name)."""
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    return attrgetter(*names) if names else lambda instance: ()


def _representer(names: tuple[str, ...]) -> Callable[[object], str]:
    values = _values(names)

    def __repr__(self: object) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(names, values(self), strict=True))
        return f"{type(self).__qualname__}({shown})"

    return __repr__


def _comparer(names: tuple[str, ...]) -> Callable[[object, object], bool]:
    values = _values(names)

    def __eq__(self: object, other: object) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return values(self) == values(other)  # as dataclasses do: tuples, identity first

    return __eq__


def _hasher(names: tuple[str, ...]) -> Callable[[object], int]:
    values = _values(names)
    return lambda self: hash(values(self))


def _refuse_set(self: object, name: str, value: object) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delete(self: object, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
