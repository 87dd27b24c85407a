"""Progress on long work: a redrawn status line on a terminal, nothing otherwise.

Callbacks may arrive from several threads; one lock keeps the counters and the line whole.
Redraws are limited to a few per second so that drawing never costs more than copying.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import TextIO

__all__ = ["WheelProgress"]


class WheelProgress:
    """Per wheel (done / total) and per byte (compressed bytes copied / wheel sizes)."""

    def __init__(self, wheels: list[Path], stream: TextIO | None = None, enabled: bool | None = None) -> None:
        # Looked up per call: a default bound at import would outlive a replaced sys.stderr.
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total_wheels = len(wheels)
        self.sizes = {w: _size(w) for w in wheels}
        self.seen = dict.fromkeys(wheels, 0)
        self.total_bytes = sum(self.sizes.values()) or 1
        self.done_wheels = 0
        self.done_bytes = 0
        self.current = ""
        self._lock = threading.Lock()
        self._last = 0.0

    def expect(self, wheel: Path, size: int) -> None:
        """A wheel whose size is known only once its work starts (``adopt --wheel-out``: the
        installed files it writes), counted from then on."""
        with self._lock:
            self.total_wheels += wheel not in self.sizes
            self.sizes[wheel] = size
            self.seen.setdefault(wheel, 0)
            self.total_bytes = sum(self.sizes.values()) or 1
            self._draw(force=True)

    def on_bytes(self, wheel: Path, member: str, nbytes: int) -> None:
        with self._lock:
            self.done_bytes += nbytes
            self.seen[wheel] = self.seen.get(wheel, 0) + nbytes
            self.current = member
            self._draw()

    def on_wheel(self, wheel: Path) -> None:
        """A wheel is finished (or failed): count the rest of its bytes (headers, skipped work)."""
        with self._lock:
            self.done_wheels += 1
            self.done_bytes += max(self.sizes.get(wheel, 0) - self.seen.get(wheel, 0), 0)
            self._draw(force=True)

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self._last < 0.1):
            return
        self._last = now
        share = min(self.done_bytes / self.total_bytes, 1.0)
        bar = "#" * int(share * 30)
        line = (f"[{bar:<30}] {share:4.0%} {self.done_wheels}/{self.total_wheels} wheels "
                f"{self.done_bytes / 1e6:.1f}/{self.total_bytes / 1e6:.1f} MB {self.current[-40:]}")
        self.stream.write("\r\x1b[K" + line)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _size(wheel: Path) -> int:
    """For the byte total only: a wheel that cannot be stat'ed fails later, with its reason."""
    try:
        return wheel.stat().st_size
    except OSError:
        return 0
