"""The name rule and the trust files that feed it, fuzzed.

The conflict rule (``conflicts.resolve``) must not depend on the order its claims come in nor
on how distributions are named: random claims, resolved as given, shuffled, and with every
distribution renamed by an order-reversing map, exclude the same claims. At most one
distribution keeps a contested name. ``scopes`` and ``pins`` lines of any text parse into
what they literally say or into less: never an exception, never a grant the text does not
hold, and merging two files never widens a scope.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from triton_backend_runtime.loading.conflicts import Claim, resolve
from triton_backend_runtime.trust.pins import parse_pins
from triton_backend_runtime.trust.scopes import parse_scopes

DISTS = ["aaa-x", "mmm-x", "zzz-x", "triton"]
NAMES = ["nvidia", "amd", "demo"]
TRUST = ["verified", "unverified", "legacy"]
#: An order-reversing renaming: if any order of names decided, the outcome would move.
RENAMED = {"aaa-x": "zzz-y", "mmm-x": "mmm-y", "zzz-x": "aaa-y", "triton": "triton"}

claims_st = st.lists(st.tuples(st.sampled_from(DISTS), st.sampled_from(TRUST), st.sampled_from(NAMES),
                               st.lists(st.sampled_from(["cuda", "hip", "cpu"]), max_size=2, unique=True),
                               st.integers(0, 2)), max_size=7)
pins_st = st.dictionaries(st.tuples(st.sampled_from(["backend", "target"]), st.sampled_from(NAMES + ["cuda"])),
                          st.sampled_from(DISTS), max_size=3)


def claims_of(rows: list[tuple[str, str, str, list[str], int]], rename: dict[str, str] | None = None) -> list[Claim]:
    out = []
    for key, (dist, trust, name, targets, order) in enumerate(rows):
        shown = (rename or {}).get(dist, dist)
        out.append(Claim(key, name, trust, order, shown, f"{shown} 1.0", targets=tuple(targets), core=dist == "triton"))
    return out


@settings(max_examples=400, deadline=None)
@given(rows=claims_st, pins=pins_st, seed=st.randoms(use_true_random=False))
def test_neither_order_nor_names_decide(rows: list[tuple[str, str, str, list[str], int]],
                                        pins: dict[tuple[str, str], str], seed: random.Random) -> None:
    core = {("backend", name): "triton 3.9.0" for dist, _, name, _, _ in rows if dist == "triton"}
    excluded = {e.key for e in resolve(claims_of(rows), [], core, pins)}
    shuffled = claims_of(rows)
    seed.shuffle(shuffled)
    assert {e.key for e in resolve(shuffled, [], core, pins)} == excluded
    renamed_pins = {key: RENAMED[dist] for key, dist in pins.items()}
    assert {e.key for e in resolve(claims_of(rows, RENAMED), [], core, renamed_pins)} == excluded
    kept: dict[str, set[str]] = {}
    for key, (dist, _, name, _, _) in enumerate(rows):
        if key not in excluded:
            kept.setdefault(name, set()).add(dist)
    assert all(len(dists) == 1 for dists in kept.values()), kept


items = st.one_of(st.sampled_from(["foo", "dist:foo", "backend:nvidia", "pass:p", "dialect:*", "op:x.y", "frob:x",
                                   "backend:", "backend:b@d", "-x", ",", " "]), st.text(max_size=12))


@settings(max_examples=400, deadline=None)
@given(one=st.lists(items, max_size=6), two=st.lists(items, max_size=6), junk=st.text(max_size=80))
def test_scope_lines_grant_what_they_say_or_less(one: list[str], two: list[str], junk: str) -> None:
    keyid = "ab" * 32
    text = f"{keyid} {','.join(one)}\n{junk}\n"
    scopes, _ = parse_scopes(text, "scopes")
    for scope in scopes.values():
        for kind, name in scope.grants:
            assert f"{kind}:{name}" in text  # never a grant the text does not hold
    if keyid in scopes:
        other, _ = parse_scopes(f"{keyid} {','.join(two)}\n", "more")
        if keyid in other:
            both = scopes[keyid].narrow(other[keyid])
            assert both.names <= scopes[keyid].names and both.names <= other[keyid].names
            for kind, name in both.grants:  # every merged grant is allowed by each side
                assert scopes[keyid].grants_name(kind, name) and other[keyid].grants_name(kind, name)


@settings(max_examples=400, deadline=None)
@given(text=st.text(max_size=200))
def test_pins_lines_never_raise(text: str) -> None:
    pins, problems = parse_pins(text, "pins")
    for (kind, name), pin in pins.items():
        assert kind in ("backend", "pass", "dialect", "op", "target") and name in text
        assert pin.dist is None or pin.sources
    assert all(p.code == "trust.pin-format" for p in problems)
