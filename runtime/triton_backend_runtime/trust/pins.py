"""Pins (``pins`` files, ``[KIND:]NAME DIST``): the distribution that owns a name claimed by
more than one (the Triton core's own included); read by :mod:`.conflicts`' rule, never by
verification. A pin only lets its distribution take a name: a bad pins line is reported and
skipped, and a name pinned to two distributions is pinned to neither."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from ..base import PIN_KINDS, TrustStoreError, canonicalize_name, record
from .editing import set_line, write_atomic
from .paths import PINS_FILE, content_lines, trust_sources
from .paths import read_trust_file as _read_text
from .syntax import CLAIM_NAME, DIST_NAME

__all__ = ["Pin", "load_pins", "merge_pins", "parse_pin_name", "parse_pins", "pin_text", "remove_pin", "set_pin"]


def parse_pin_name(text: str, where: str) -> tuple[str, str]:
    """``[KIND:]NAME`` of a pin: ``(kind, name)``, a bare name being a backend's;
    TrustStoreError ``name-format`` otherwise (a pin names one name: no ``*``)."""
    kind, colon, name = text.partition(":")
    kind, name = (kind.lower(), name) if colon else ("backend", text)
    if kind not in PIN_KINDS or not CLAIM_NAME.fullmatch(name):
        kinds = ", ".join(PIN_KINDS)
        raise TrustStoreError("name-format", where, f"{text[:80]!r} is not [KIND:]NAME (KIND one of {kinds}; "
                                                    "NAME of letters, digits and _ . + -)")
    return kind, name


def pin_text(kind: str, name: str) -> str:
    """How a pinned name is written: a backend's bare, any other ``KIND:NAME``."""
    return name if kind == "backend" else f"{kind}:{name}"


@record(frozen=True)
class Pin:
    """The distribution a name is pinned to (normalised; None where pins disagree: then it is
    pinned to none), and the ``file:line`` that say so."""

    dist: str | None
    sources: tuple[str, ...]

    def describe(self) -> str:
        return self.dist if self.dist is not None else "nothing (the pins disagree)"

    def join(self, other: Pin) -> Pin:
        """Two pins of one name: the same distribution, or none (never the later one)."""
        return Pin(self.dist if self.dist == other.dist else None, self.sources + other.sources)


def parse_pins(text: str, where: str) -> tuple[dict[tuple[str, str], Pin], list[TrustStoreError]]:
    """A ``pins`` file: ``[KIND:]NAME DIST`` lines, ``#`` comments. A bad line is reported and
    skipped (a pin only ever lets a distribution take a name: without it, less loads)."""
    pins: dict[tuple[str, str], Pin] = {}
    problems: list[TrustStoreError] = []
    for at, content in content_lines(text, where):
        fields = content.split()
        try:
            if len(fields) != 2 or not DIST_NAME.fullmatch(fields[1]):
                raise TrustStoreError("pin-format", at, f"expected '[KIND:]NAME DIST', found {content[:120]!r}")
            key = parse_pin_name(fields[0], at)
        except TrustStoreError as exc:
            problems.append(TrustStoreError("pin-format", at, f"{exc.detail}; line skipped"))
            continue
        pin = Pin(canonicalize_name(fields[1]), (at,))
        pins[key] = pins[key].join(pin) if key in pins else pin
    for (kind, name), pin in pins.items():
        if pin.dist is None:
            problems.append(TrustStoreError("pin-format", pin.sources[0], f"{pin_text(kind, name)} is pinned to "
                                            f"different distributions ({', '.join(pin.sources)}); pinned to none"))
    return pins, problems


def merge_pins(into: dict[tuple[str, str], Pin], pins: Mapping[tuple[str, str], Pin]) -> list[TrustStoreError]:
    """Add ``pins`` to ``into``; the names now pinned to two distributions (from two files) are reported."""
    problems = []
    for key, pin in pins.items():
        mine = into.get(key)
        into[key] = pin if mine is None else mine.join(pin)
        if mine is not None and mine.dist is not None and into[key].dist is None:
            problems.append(TrustStoreError("pin-format", pin.sources[0], f"{pin_text(*key)} is pinned to "
                                            f"different distributions ({', '.join(into[key].sources)}); "
                                            "pinned to none"))
    return problems


def load_pins(env: Mapping[str, str] | None = None) -> tuple[dict[tuple[str, str], Pin], list[TrustStoreError]]:
    """The pins alone (what the conflict rule reads at load, without parsing any key)."""
    pinned: dict[tuple[str, str], Pin] = {}
    problems: list[TrustStoreError] = []
    for path in trust_sources(env):
        if os.path.basename(path) == PINS_FILE:
            try:
                pins, found = parse_pins(_read_text(path), path)
            except TrustStoreError as exc:
                problems.append(exc)
                continue
            problems += found + merge_pins(pinned, pins)
    return pinned, problems


def _is_pin(kind: str, name: str) -> Callable[[str], bool]:
    def matches(first: str) -> bool:
        try:
            return parse_pin_name(first, "-") == (kind, name)
        except TrustStoreError:
            return False

    return matches


def set_pin(directory: str, kind: str, name: str, dist: str) -> list[str]:
    """Pin ``kind`` ``name`` to ``dist`` in ``directory``'s pins file (replacing its line there)."""
    line = f"{pin_text(kind, name)} {canonicalize_name(dist)}"
    return set_line(os.path.join(directory, PINS_FILE), _is_pin(kind, name), line)


def remove_pin(directory: str, kind: str, name: str) -> list[str]:
    """Drop the pins of ``kind`` ``name`` from ``directory``'s pins file; returns the lines removed."""
    path = os.path.join(directory, PINS_FILE)
    matches = _is_pin(kind, name)
    kept: list[str] = []
    removed: list[str] = []
    for line in _read_text(path, rewrite=True).splitlines():
        fields = line.split("#", 1)[0].split()
        (removed if fields and matches(fields[0]) else kept).append(line)
    if removed:
        write_atomic(path, "".join(f"{line}\n" for line in kept).encode("utf-8"))
    return removed
