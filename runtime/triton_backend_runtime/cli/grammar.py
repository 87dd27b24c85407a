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
from collections.abc import Callable

from ..base import TrustError, describe, from_os_error

__all__ = [
    "EXIT_BROKEN_PIPE", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "JSON_FORMAT", "fail",
    "internal_error", "pipe_closed", "run_command",
]

#: Success; a checked failure (a verdict, a finding); unusable input (``input.*``, usage).
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: 128 + SIGINT: Ctrl-C.
EXIT_INTERRUPTED = 130
#: 128 + SIGPIPE, what a shell reports for a C tool whose reader went away.
EXIT_BROKEN_PIPE = 141
#: The version of every ``--json`` document's layout; raised when a key changes meaning or goes.
JSON_FORMAT = 1


def run_command(prog: str, args: argparse.Namespace, command: Callable[[], int],
                usage: tuple[type[TrustError], ...]) -> int:
    """Run the parsed ``command`` and return its exit code. Every failure ends here: an error of
    a ``usage`` class exits 2, any other :class:`TrustError` or OSError 1, Ctrl-C 130, a closed
    pipe 141, and an exception of no such class (a bug of ours) is ``error.internal``, its
    traceback shown only with ``-v``."""
    try:
        return int(command())
    except BrokenPipeError:
        return pipe_closed()
    except TrustError as exc:
        return fail(prog, args, exc, EXIT_USAGE if isinstance(exc, usage) else EXIT_FAILED)
    except OSError as exc:
        return fail(prog, args, from_os_error(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        if getattr(args, "verbose", False):
            raise
        return fail(prog, args, internal_error(_command_name(args), exc), EXIT_FAILED)


def _command_name(args: argparse.Namespace) -> str:
    """``trust add``, ``verify``: the (sub)command that ran, for ``error.internal``."""
    return " ".join(str(part) for part in (getattr(args, "command", None), getattr(args, "action", None)) if part)


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
