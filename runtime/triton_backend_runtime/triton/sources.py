"""Verified sources run as they were verified: the code is compiled from the bytes that were
hashed, never read from a ``__pycache__`` pyc (:mod:`.bytecode`), and a source changed since is
refused under strict. The registry says which sources were verified; this tells the import
watch (:mod:`.importwatch`) to run them so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..base import STRICT
from ..loading import Registry, emit, get
from . import importwatch
from .bytecode import SourceChanged, code_for

__all__ = ["guard_sources", "verified_code", "verified_or_none"]


def guard_sources(registry: Registry) -> None:
    """The sources the registry verified run as they were verified, never a ``__pycache__``
    pyc (:mod:`.bytecode`): a source changed since is refused under strict."""
    if registry.verified_sources:
        importwatch.guard(registry.verified_sources, registry.verified_tops, verified_code)


def verified_code(origin: str, verified: list[object]) -> Any:
    return verified_or_none(code_for, origin, verified)


def verified_or_none(read: Callable[[str, list[object]], Any], origin: str, verified: list[object]) -> Any:
    """``read(origin, verified)``; a source changed since it was verified is refused under
    strict and, under warn, imported as Python would (None) with a warning."""
    try:
        return read(origin, verified)
    except SourceChanged as exc:
        if get().policy == STRICT:
            raise
        emit(str(exc))
        return None
