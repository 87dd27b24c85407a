"""A shorter GIL switch interval while threads hash or deflate beside Python: one rule for both
distributions (the runtime's cold verification, the packager's worker pools).

A thread that reads, hashes or deflates a piece lets go of the GIL and must take it back for
the next; while another thread runs Python, that wait lasts up to ``sys.getswitchinterval()``
(5 ms by default), longer than hashing an 8 MiB piece. Measured on an H200, a 416 MB file
hashed beside a busy thread: 4.9 s at 5 ms in new 1 MiB pieces, 461 ms at 0.5 ms, 412 ms at
0.1 ms in one reused 8 MiB buffer (:func:`.regularfile.read_views`), 370 ms alone.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["HASHING_SWITCH_INTERVAL", "short_switch_interval"]

#: The interval while such threads run (seconds).
HASHING_SWITCH_INTERVAL = 0.0001


@contextmanager
def short_switch_interval(seconds: float = HASHING_SWITCH_INTERVAL) -> Iterator[None]:
    """At most ``seconds`` while the block runs, restored after. Process-wide while it lasts;
    only ever shortened (an interval set lower is kept)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, seconds))
    try:
        yield
    finally:
        sys.setswitchinterval(before)
