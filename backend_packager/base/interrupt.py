"""Stopping work on Ctrl-C or SIGTERM within a chunk, not after every byte is read.

A signal raises in the main thread only; threads of a pool go on. The command line sets
:data:`STOP` as the signal arrives (``run_command``'s ``on_signal``), every loop that reads
or inflates checks it once per chunk (:func:`checkpoint`: one flag read per MiB), and
:func:`worker_pool` drops the work not yet started when the main thread leaves by an
exception, so that the pool's shutdown waits for one chunk per thread at most.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["Cancelled", "POOL_SWITCH_INTERVAL", "STOP", "checkpoint", "worker_pool"]

#: The GIL switch interval while a pool runs (seconds; Python's default is 5 ms). Workers let
#: go of the GIL for each piece they read, hash or deflate, and wait to take it back while
#: the main thread runs Python (the ELF scan beside the hashing): at 5 ms they mostly wait.
#: Measured on an H200, a 416 MB file hashed beside a busy thread: 4.9 s at 5 ms in 1 MiB
#: pieces, 0.41 s at 0.1 ms in reused 8 MiB ones, 0.37 s alone.
POOL_SWITCH_INTERVAL = 0.0001

#: Set once a signal asked the command to stop; cleared when a command starts.
STOP = threading.Event()


class Cancelled(KeyboardInterrupt):
    """Raised by :func:`checkpoint` once :data:`STOP` is set: a worker's part of an
    interrupted command, abandoned (a KeyboardInterrupt, so no ``except Exception`` takes it
    for one input's failure and goes on with the next)."""


def checkpoint() -> None:
    """Raise :class:`Cancelled` when the command is being stopped."""
    if STOP.is_set():
        raise Cancelled


@contextlib.contextmanager
def worker_pool(jobs: int) -> Iterator[ThreadPoolExecutor]:
    """A thread pool whose queued work is cancelled when the block ends by an exception
    (an interrupt, one task's error): only the tasks running are waited for. The GIL switch
    interval is :data:`POOL_SWITCH_INTERVAL` while the block runs (process-wide; restored after)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=jobs)
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, POOL_SWITCH_INTERVAL))
    try:
        try:
            yield pool
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    finally:
        sys.setswitchinterval(before)
