"""Writing files so that nothing is ever half-written: temporary name, then rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def atomic_output(path: Path, mode: int = 0o644) -> Iterator[BinaryIO]:
    """Yield a temporary file beside ``path``; rename it into place only on success."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            yield stream
            stream.flush()
            os.fchmod(stream.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    with atomic_output(path, mode) as stream:
        stream.write(data)
