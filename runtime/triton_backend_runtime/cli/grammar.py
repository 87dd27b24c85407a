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
from collections.abc import Callable, Sequence
from typing import Any

from ..base import TrustError, describe, from_os_error

__all__ = [
    "EXIT_BROKEN_PIPE", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "JSON_FORMAT", "Report",
    "add_verbosity", "exit_code", "fail", "internal_error", "parse", "pipe_closed", "run_command",
]

#: Success; a checked failure (a verdict, a finding); unusable input (``input.*``, usage).
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: 128 + SIGINT: Ctrl-C.
EXIT_INTERRUPTED = 130
#: 128 + SIGPIPE, what a shell reports for a C tool whose reader went away.
EXIT_BROKEN_PIPE = 141
#: The version of every ``--json`` document's layout; raised when a key changes meaning or goes.
JSON_FORMAT = 1


class Report:
    """What a command says: lines for people as they come, or, with ``--json``, its facts
    gathered into one document (``"format": JSON_FORMAT``) printed at the end."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.facts: dict[str, Any] = {}

    def say(self, line: str) -> None:
        if not self.as_json:
            print(line)

    def end(self, code: int) -> int:
        if self.as_json:
            print(json.dumps({"format": JSON_FORMAT, **self.facts}, indent=1, sort_keys=True))
        return code


def run_command(prog: str, args: argparse.Namespace, command: Callable[[], int],
                usage: tuple[type[TrustError], ...]) -> int:
    """Run the parsed ``command`` and return its exit code. Every failure ends here: an
    ``input.*`` error or one of a ``usage`` class exits 2, any other :class:`TrustError` or
    OSError 1, Ctrl-C 130, a closed pipe 141, and an exception of no such class (a bug of ours)
    is ``error.internal``, its traceback shown only with ``-v``."""
    try:
        return int(command())
    except BrokenPipeError:
        return pipe_closed()
    except TrustError as exc:
        return fail(prog, args, exc, exit_code(exc, usage))
    except OSError as exc:
        return fail(prog, args, from_os_error(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        if getattr(args, "verbose", False):
            raise
        return fail(prog, args, internal_error(_command_name(args), exc), EXIT_FAILED)


def exit_code(error: TrustError, usage: tuple[type[TrustError], ...] = ()) -> int:
    """2 for unusable input (an ``input.*`` code, or an error of a ``usage`` class), else 1."""
    return EXIT_USAGE if error.code.startswith("input.") or isinstance(error, usage) else EXIT_FAILED


def add_verbosity(parser: argparse.ArgumentParser, default: object, quiet: str, verbose: str) -> None:
    """``-q``/``--quiet`` and ``-v``/``--verbose`` (counted), one excluding the other. Added to
    the main parser and to every command, so that either place works: the commands' default
    is ``argparse.SUPPRESS``, so that one given before the command survives."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", action="store_true", default=default, help=quiet)
    group.add_argument("-v", "--verbose", action="count", default=default, help=verbose)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser``'s arguments; ``-q`` with ``-v`` is a usage error wherever each was given
    (before the command and after it are two parsers, which argparse checks apart)."""
    args = parser.parse_args(argv)
    if getattr(args, "quiet", False) and getattr(args, "verbose", 0):
        parser.error("argument -q/--quiet: not allowed with argument -v/--verbose")
    return args


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
