"""JSON from hostile files, parsed within bounds.

Every manifest on ``sys.path`` and every cache file is input written by someone else.
``json.loads`` alone recurses once per nesting level (a deeply nested document ends in
``RecursionError``) and turns a 5000-digit number into a ``ValueError`` deep inside the
parser (or, below the interpreter's limit, a huge ``int``). :func:`loads` checks size,
nesting depth, number length and, where the caller asks, the number of values, all before
parsing and all in C (a hook called per number cost ~1.8 s on 16 MB of numbers), and turns
every failure into the one error class the caller names, with the file in it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import TrustError

__all__ = ["MAX_DEPTH", "MAX_NUMBER_DIGITS", "loads", "nesting_depth"]

#: Deeper than any manifest, envelope or cache file this package writes (they nest < 10).
MAX_DEPTH = 32
#: Digits in one number: more than any size, time or inode this package records.
MAX_NUMBER_DIGITS = 24
_PARENS = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_LONG_NUMBER = re.compile(rb"[0-9]{%d}" % (MAX_NUMBER_DIGITS + 1))


def _outside_strings(data: bytes) -> bytes:
    """The bytes of ``data`` outside JSON strings: escaped backslashes, then escaped quotes,
    dropped (left to right, as JSON reads them), so the text between the remaining quotes
    alternates outside / inside a string (an unterminated string runs to the end)."""
    flat = data.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in data else data
    return b"".join(flat.split(b'"')[0::2])


def _depth(brackets: bytes, stop: int) -> int:
    depth = 0
    while b"()" in brackets and depth < stop:
        brackets = brackets.replace(b"()", b"")
        depth += 1
    return depth


def nesting_depth(data: bytes, stop: int = MAX_DEPTH + 1) -> int:
    """The deepest ``[``/``{`` nesting in ``data`` (strings ignored), counted up to ``stop``.

    All in C, a few passes over the bytes: escaped backslashes, then escaped quotes, are
    dropped (left to right, as JSON reads them), so the text between the remaining quotes
    alternates outside / inside a string (an unterminated string runs to the end); the
    brackets outside strings become parentheses, and each pass deletes every innermost
    ``()``: the passes it takes are the depth. ~5 ms for a 2 MB manifest, where a scan
    token by token in Python took ~50 ms.
    """
    return _depth(_outside_strings(data).translate(_PARENS, _NOT_BRACKETS), stop)


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def loads(data: bytes, where: str, error: type[TrustError], *, limit: int,
          max_values: tuple[int, str] | None = None) -> Any:
    """Parse ``data`` (UTF-8) as JSON within ``limit`` bytes, MAX_DEPTH levels, numbers of at
    most MAX_NUMBER_DIGITS digits in a run and, given ``max_values`` (a count and the name of
    its cap), at most that many values: containers plus the commas between their elements
    (every element or member after a container's first follows one), strings' content ignored.

    Raises ``error("too-large" | "json" | "limit", where, detail)``; never anything else.
    """
    if len(data) > limit:
        raise error("too-large", where, f"{len(data)} bytes; the limit is {limit}")
    outside = _outside_strings(data)
    brackets = outside.translate(_PARENS, _NOT_BRACKETS)
    depth = _depth(brackets, MAX_DEPTH + 1)
    if depth > MAX_DEPTH:
        raise error("json", where, f"nested {depth} levels deep; the limit is {MAX_DEPTH}")
    if _LONG_NUMBER.search(outside):
        raise error("json", where, f"not valid JSON: a number of more than {MAX_NUMBER_DIGITS} digits")
    if max_values is not None:
        values = outside.count(b",") + len(brackets) // 2 + 1
        if values > max_values[0]:
            raise error("limit", where, f"about {values:,} JSON values; the limit is {max_values[0]:,} "
                                        f"({max_values[1]})")
    try:
        # Decoded first: json.loads(bytes) would also take UTF-16 and UTF-32, which the scans
        # above do not read.
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise error("json", where, f"not valid JSON: {exc}") from None
