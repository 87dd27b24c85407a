"""Scratch directories of session-scoped fixtures, which outlive the module that first asked
for them (``conftest.py`` removes every other module's scratch when the module is done)."""

from __future__ import annotations

from pathlib import Path

import pytest

SESSION_DIRS: set[Path] = set()


def session_dir(factory: pytest.TempPathFactory, name: str) -> Path:
    """``factory.mktemp(name)`` for a session-scoped fixture, kept until the session ends."""
    directory = factory.mktemp(name)
    SESSION_DIRS.add(directory)
    return directory
