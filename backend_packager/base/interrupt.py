"""Stopping work on Ctrl-C or SIGTERM within a chunk, not after every byte is read.

A signal raises in the main thread only; threads of a pool go on. The command line sets
:data:`STOP` as the signal arrives (``run_command``'s ``on_signal``), every loop that reads
or inflates checks it once per chunk (:func:`checkpoint`: one flag read per MiB), and
:func:`worker_pool` drops the work not yet started when the main thread leaves by an
exception, so that the pool's shutdown waits for one chunk per thread at most.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from triton_backend_runtime.base import short_switch_interval

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["Cancelled", "STOP", "checkpoint", "worker_pool"]


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
    interval is short while the block runs (``short_switch_interval``: workers hash or deflate
    beside the main thread's Python)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=jobs)
    with short_switch_interval():
        try:
            yield pool
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
