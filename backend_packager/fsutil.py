"""Writing files so that nothing is ever half-written: the runtime's one atomic writer.

The packager and the runtime share :mod:`triton_backend_runtime.atomicfile` (unnamed
``O_TMPFILE`` data linked in and renamed over the target; a writer killed by ``kill -9``
leaves nothing the next write does not remove). This module only adapts it to paths.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from triton_backend_runtime import atomicfile


@contextlib.contextmanager
def atomic_output(path: Path, mode: int = 0o644, *, durable: bool = False) -> Iterator[BinaryIO]:
    """A stream whose bytes become ``path`` (parents made) only when the block succeeds.
    Not fsynced by default: output wheels are rebuilt from their inputs after a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomicfile.atomic_output(str(path), mode=mode, durable=durable) as stream:
        yield stream


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """``path`` replaced by ``data`` durably (keys, small files)."""
    with atomic_output(path, mode, durable=True) as stream:
        stream.write(data)
