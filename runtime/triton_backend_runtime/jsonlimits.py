"""JSON from hostile files, parsed within bounds.

Every manifest on ``sys.path`` and every cache file is input written by someone else.
``json.loads`` alone recurses once per nesting level (a deeply nested document ends in
``RecursionError``) and turns a 5000-digit number into a ``ValueError`` deep inside the
parser (or, below the interpreter's limit, a huge ``int``). :func:`loads` checks size,
nesting depth and number length before and while parsing, and turns every failure into
the one error class the caller names, with the file in it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import TrustError

#: Deeper than any manifest, envelope or cache file this package writes (they nest < 10).
MAX_DEPTH = 32
#: Digits in one number: more than any size, time or inode this package records.
MAX_NUMBER_DIGITS = 24
# Strings are skipped whole (brackets inside them do not nest); brackets are counted. An
# unterminated string runs to the end rather than failing, so no input makes the scan
# restart at every quote (which would be quadratic).
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)


def nesting_depth(data: bytes) -> int:
    """The deepest ``[``/``{`` nesting in ``data``, strings ignored; a C-speed scan."""
    depth = deepest = 0
    for match in _TOKEN.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_DIGITS:
        raise ValueError(f"a number of {len(text)} digits (the limit is {MAX_NUMBER_DIGITS})")
    return int(text)


def _bounded_float(text: str) -> float:
    if len(text) > MAX_NUMBER_DIGITS * 2:
        raise ValueError(f"a number of {len(text)} characters")
    return float(text)


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def loads(data: bytes, where: str, error: type[TrustError], *, limit: int) -> Any:
    """Parse ``data`` as JSON within ``limit`` bytes, MAX_DEPTH levels and short numbers.

    Raises ``error("too-large" | "json", where, detail)``; never anything else.
    """
    if len(data) > limit:
        raise error("too-large", where, f"{len(data)} bytes; the limit is {limit}")
    depth = nesting_depth(data)
    if depth > MAX_DEPTH:
        raise error("json", where, f"nested {depth} levels deep; the limit is {MAX_DEPTH}")
    try:
        return json.loads(
            data, parse_int=_bounded_int, parse_float=_bounded_float, parse_constant=_no_constant
        )
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise error("json", where, f"not valid JSON: {exc}") from None
