"""One deflate stream (RFC 1951) made from fixed-size chunks deflated in parallel.

Each chunk is deflated on its own by a raw compressor primed with the :data:`WINDOW` bytes
before it (the history the inflater will have when it reaches the chunk, so back-references
may reach into it). Every chunk but the last ends with a sync flush: an empty stored block
that ends the deflate blocks so far on a byte boundary without setting BFINAL, so the next
chunk's blocks may follow directly. The last chunk ends with ``Z_FINISH`` (BFINAL set).
Joined in order, the pieces are one valid stream. The chunk edges depend on :data:`CHUNK`
only, never on the thread count, so the bytes are the same for any ``jobs``. Both engines
release the GIL while they deflate, so threads use every core.

The engine is ISA-L's deflate (the ``isal`` package, the ``fast`` extra) where it is
installed, zlib otherwise. At their fastest levels they compress libtriton.so alike (within
4 %), and ISA-L does it about four times as fast; deflate is all that ``adopt -o`` adds to
``adopt``. The bytes differ between engines, so a byte-identical rebuild needs the same one:
:func:`engine` names it, and ``adopt -o --json`` reports it.

Inflating stays zlib's everywhere (the writer that migrates a wheel, the readers): ISA-L's
inflater accepts streams that zlib, and so pip, refuses (a Huffman table zlib calls "invalid
literal/lengths set" inflates to nothing there), and a member must be judged as the
installer will read it.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["CHUNK", "LEVEL", "WINDOW", "ChunkDeflater", "Engine", "deflate_chunk", "engine", "engines"]

#: Uncompressed bytes deflated as one unit: fixed, so the output never depends on ``jobs``.
CHUNK = 1 << 20
#: zlib's fastest level: libtriton.so to a quarter of its size at 80-120 MB/s a core; level 6,
#: the default, makes it 13% smaller at under a third of the speed.
LEVEL = 1
#: Deflate's window: the bytes before a chunk that its compressor is primed with.
WINDOW = 32 << 10


@dataclass(frozen=True)
class Engine:
    """A raw deflate compressor: its name, ``compressobj`` (zlib's signature), the level used,
    and its CRC-32 (the same function, ISA-L's about three times as fast as zlib's)."""

    name: str
    compressobj: Callable[..., Any]
    level: int
    crc32: Callable[[bytes, int], int]


#: zlib at :data:`LEVEL`: always there.
ZLIB = Engine("zlib", zlib.compressobj, LEVEL, zlib.crc32)


def engines() -> list[Engine]:
    """Every engine installed, the preferred first."""
    try:
        from isal import isal_zlib  # the `fast` extra
    except ImportError:
        return [ZLIB]
    # ISA-L's levels run 0-3; its level 1 compresses about as well as zlib's 1.
    return [Engine("isal", isal_zlib.compressobj, 1, isal_zlib.crc32), ZLIB]


def engine() -> Engine:
    """The engine ``adopt -o`` deflates with: ISA-L where installed, else zlib."""
    return engines()[0]


Owner = TypeVar("Owner")


def deflate_chunk(chunk: bytes, history: bytes, last: bool, using: Engine) -> bytes:
    """Raw deflate of one chunk, primed with ``history`` (at most :data:`WINDOW` bytes; empty
    for a stream's first chunk), ended by a sync flush, or by the final block when ``last``."""
    compressor = (using.compressobj(using.level, zlib.DEFLATED, -15, zdict=history[-WINDOW:]) if history
                  else using.compressobj(using.level, zlib.DEFLATED, -15))
    return bytes(compressor.compress(chunk) + compressor.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH))


class ChunkDeflater(Generic[Owner]):
    """Chunks in, in stream order, deflated on ``pool``; pieces out in the same order. At most
    ``depth`` chunks are held at once (read, queued or deflated, not yet taken), so memory is
    bounded by ``depth`` chunks whatever the file sizes. Each chunk carries its ``owner`` (the
    member it belongs to) back out with its piece."""

    def __init__(self, pool: Executor, depth: int, using: Engine) -> None:
        self._pool = pool
        self._depth = max(1, depth)
        self._using = using
        self._pending: deque[tuple[Owner, Future[bytes], bool]] = deque()

    def feed(self, owner: Owner, chunk: bytes, history: bytes, last: bool) -> Iterator[tuple[Owner, bytes, bool]]:
        """Queue one chunk; yields ``(owner, piece, last)`` for the oldest while too many are held."""
        self._pending.append((owner, self._pool.submit(deflate_chunk, chunk, history, last, self._using), last))
        while len(self._pending) > self._depth:
            yield self._take()

    def drain(self) -> Iterator[tuple[Owner, bytes, bool]]:
        """Every piece still held, in order."""
        while self._pending:
            yield self._take()

    def cancel(self) -> None:
        """Drop the chunks not yet started (a failed or interrupted write)."""
        for _, future, _ in self._pending:
            future.cancel()
        self._pending.clear()

    def _take(self) -> tuple[Owner, bytes, bool]:
        owner, future, last = self._pending.popleft()
        return owner, future.result(), last
