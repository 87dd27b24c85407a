"""``base.records.record``: the runtime's data classes behave as dataclasses do, for the options
the runtime uses, and declaring one compiles nothing (what it exists for)."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from triton_backend_runtime.base import record


def declare() -> tuple[type[Any], type[Any]]:
    @record()
    class Point:
        """A mutable record."""

        x: int
        label: str = ""
        tags: list[str] = field(default_factory=list)
        hidden: int = field(default=0, repr=False, compare=False)

    @record(frozen=True)
    class Key:
        """A frozen one."""

        name: str
        version: int = 1

    return Point, Key


def test_constructs_as_a_dataclass_would() -> None:
    point_cls, _ = declare()
    p = point_cls(1, label="a")
    assert (p.x, p.label, p.tags, p.hidden) == (1, "a", [], 0)
    assert point_cls(1).tags is not point_cls(1).tags  # a fresh default per instance
    assert [f.name for f in dataclasses.fields(point_cls)] == ["x", "label", "tags", "hidden"]
    assert dataclasses.asdict(p) == {"x": 1, "label": "a", "tags": [], "hidden": 0}
    assert dataclasses.replace(p, label="b").label == "b"
    assert repr(p).endswith(".Point(x=1, label='a', tags=[])")  # the qualname, as dataclasses show it


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((), {}, "missing required argument: 'x'"),
    ((1,), {"x": 2}, "multiple values for argument 'x'"),
    ((1,), {"colour": 3}, "unexpected keyword argument 'colour'"),
    ((1, "a", [], 0, 5), {}, "takes 4 positional arguments but 5 were given"),
])
def test_wrong_arguments_are_a_type_error(args: tuple[Any, ...], kwargs: dict[str, Any], message: str) -> None:
    point_cls, _ = declare()
    with pytest.raises(TypeError, match=message):
        point_cls(*args, **kwargs)


def test_eq_compares_fields_and_makes_it_unhashable() -> None:
    point_cls, _ = declare()
    assert point_cls(1, "a") == point_cls(1, "a")
    assert point_cls(1, "a") != point_cls(1, "b")
    assert point_cls(1, hidden=1) == point_cls(1, hidden=2)  # compare=False
    nan = float("nan")
    assert point_cls(nan) != point_cls(float("nan")) and point_cls(nan) == point_cls(nan)  # identity first, as tuples
    with pytest.raises(TypeError, match="unhashable"):
        hash(point_cls(1))


def test_frozen_refuses_assignment_and_hashes_its_fields() -> None:
    _, key_cls = declare()
    key = key_cls("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.name = "b"
    with pytest.raises(dataclasses.FrozenInstanceError):
        del key.version
    assert {key: 1}[key_cls("a", 1)] == 1
    assert key != key_cls("a", 2)


def test_identity_records_keep_object_equality() -> None:
    @record(eq=False, repr=False)
    class Entry:
        """Compared by identity."""

        name: str

    a, b = Entry("x"), Entry("x")
    assert a != b and a == a and len({a, b}) == 2
    assert repr(a).startswith("<")


def test_declaring_compiles_nothing() -> None:
    """The point of it: @dataclass compiles its methods from source when a module is imported
    (``exec`` and ``compile`` audit events); a record declares the same class without either."""
    seen: list[str] = []
    counting = [False]

    def hook(event: str, _args: tuple[Any, ...]) -> None:
        if counting[0] and event in ("exec", "compile"):
            seen.append(event)

    sys.addaudithook(hook)
    counting[0] = True
    try:
        declare()
        records = len(seen)

        @dataclasses.dataclass(frozen=True)
        class Plain:
            name: str
    finally:
        counting[0] = False
    assert records == 0, seen
    assert len(seen) > 0, "the reference (@dataclass) compiled nothing: the check would prove nothing"


# -- a record and a dataclass of the same fields agree on every call ------------------------

FIELD_NAMES = ["a", "b", "c", "d"]


@st.composite
def declarations(draw: st.DrawFn) -> tuple[list[tuple[str, str]], dict[str, bool]]:
    """Fields in order, each required, defaulted or with a factory (required ones first, as
    dataclasses demand), and the options."""
    count = draw(st.integers(0, 4))
    kinds = sorted(draw(st.lists(st.sampled_from(["required", "default", "factory"]), min_size=count,
                                 max_size=count)), key=lambda kind: kind != "required")
    options = draw(st.fixed_dictionaries({"eq": st.booleans(), "frozen": st.booleans()}))
    return list(zip(FIELD_NAMES, kinds, strict=False)), options


def build(decorate: Any, fields: list[tuple[str, str]]) -> type[Any]:
    namespace: dict[str, Any] = {"__annotations__": {name: "object" for name, _ in fields}, "__doc__": "x"}
    for name, kind in fields:
        if kind == "default":
            namespace[name] = 0
        elif kind == "factory":
            namespace[name] = field(default_factory=list)
    made: type[Any] = decorate(type("R", (), namespace))
    return made


def outcome(call: Any) -> tuple[str, Any]:
    try:
        made = call()
    except TypeError:
        return "TypeError", None
    return "made", made


@given(declarations(), st.lists(st.integers(), max_size=5),
       st.dictionaries(st.sampled_from([*FIELD_NAMES, "e"]), st.integers(), max_size=5))
def test_a_record_behaves_as_the_same_dataclass(declared: tuple[list[tuple[str, str]], dict[str, bool]],
                                                args: list[int], kwargs: dict[str, int]) -> None:
    fields, options = declared
    ours = build(record(eq=options["eq"], frozen=options["frozen"]), fields)
    theirs = build(dataclasses.dataclass(eq=options["eq"], frozen=options["frozen"]), fields)
    got, expected = outcome(lambda: ours(*args, **kwargs)), outcome(lambda: theirs(*args, **kwargs))
    assert got[0] == expected[0], (fields, args, kwargs)
    if got[1] is None:
        return
    assert dataclasses.asdict(got[1]) == dataclasses.asdict(expected[1])
    assert list(vars(got[1])) == list(vars(expected[1]))  # the field order schema.encode writes in
    assert repr(got[1]).split("(", 1)[1] == repr(expected[1]).split("(", 1)[1]
    again = ours(*args, **kwargs)
    assert (got[1] == again) == (expected[1] == theirs(*args, **kwargs))
    assert (ours.__hash__ is None) == (theirs.__hash__ is None)
    if ours.__hash__ is not None and options["eq"]:  # frozen: hashed by its fields, a list among them or not
        mine, reference = outcome(lambda: hash(got[1]) == hash(again)), outcome(lambda: hash(expected[1]))
        assert mine[0] == reference[0] and mine[1] in (True, None)
    if options["frozen"]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            got[1].a = 1
