"""Editing a trust directory (the ``trust`` command). Every write is atomic: a uniquely named
temporary file in the same directory (never a name trust_sources lists), fsync, os.replace."""

from __future__ import annotations

from collections.abc import Callable

from .paths import read_trust_file as _read_text

__all__ = ["set_line", "write_atomic"]


def write_atomic(path: str, data: bytes) -> None:
    """Replace a trust file at once (trust files are public: 0644 unless it exists)."""
    from ..base import write_atomic as write

    write(path, data)


def set_line(path: str, matches: Callable[[str], bool], line: str) -> list[str]:
    """Put ``line`` in place of every line whose first field ``matches`` (comments and other
    lines kept as they are, a new line appended otherwise); returns the lines replaced."""
    text = _read_text(path, rewrite=True)
    kept: list[str] = []
    replaced: list[str] = []
    for old in text.splitlines():
        fields = old.split("#", 1)[0].split()
        if fields and matches(fields[0]):
            if not replaced:
                kept.append(line)
            replaced.append(old)
        else:
            kept.append(old)
    if not replaced:
        kept.append(line)
    write_atomic(path, ("\n".join(kept) + "\n").encode("utf-8"))
    return replaced
