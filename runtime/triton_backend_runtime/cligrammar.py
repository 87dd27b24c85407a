"""The command-line grammar both CLIs speak (``python -m triton_backend_runtime`` and
``backend-packager``): exit codes, the ``--json`` document's format number, and how a failure
ends a command, one line ``PROG: error: PATH: DETAIL (CODE)`` on stderr (with ``--json`` also
``{"format": 1, "error": {...}}`` on stdout), never a traceback.

Kept in the runtime, which the packager already depends on (and which must not import the
packager), so that the two CLIs cannot drift apart.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .errors import TrustError, describe

__all__ = [
    "EXIT_BROKEN_PIPE", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "JSON_FORMAT", "fail",
    "internal_error", "pipe_closed",
]

#: Success; a checked failure (a verdict, a finding); unusable input (``input.*``, usage).
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: 128 + SIGINT: Ctrl-C.
EXIT_INTERRUPTED = 130
#: 128 + SIGPIPE, what a shell reports for a C tool whose reader went away.
EXIT_BROKEN_PIPE = 141
#: The version of every ``--json`` document's layout; raised when a key changes meaning or goes.
JSON_FORMAT = 1


def fail(prog: str, args: argparse.Namespace, error: TrustError, code: int) -> int:
    """Report ``error`` as the command's end and return ``code``: the error object on stdout
    where ``--json`` was asked for, the one line on stderr."""
    try:
        if getattr(args, "json", False):
            print(json.dumps({"format": JSON_FORMAT, "error": error.as_dict()}, indent=1, sort_keys=True))
        print(f"{prog}: error: {error} ({error.code})", file=sys.stderr)
    except BrokenPipeError:
        return pipe_closed()
    return code


def internal_error(command: str, exc: BaseException) -> TrustError:
    """An unexpected exception (a bug of ours) as ``error.internal`` about ``command``."""
    return TrustError("internal", command or "-", f"{describe(exc, 300)} (a bug: -v shows the traceback)")


def pipe_closed() -> int:
    """The reader went away (``| head``): stop without a traceback, and keep Python's exit
    flush from raising again (the recipe in the signal module's documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE
