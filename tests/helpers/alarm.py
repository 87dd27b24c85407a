"""A bound on how long one fuzz example may run: a hang fails that example."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType


class Hang(BaseException):
    """Raised in the command by the alarm; a BaseException, so no handler of the CLI's takes
    it (a TimeoutError is an OSError, which the CLIs turn into a ``file.*`` line)."""


@contextlib.contextmanager
def alarm(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in the main thread once ``seconds`` have passed."""

    def ring(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
