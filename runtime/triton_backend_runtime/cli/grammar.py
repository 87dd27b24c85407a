"""The command-line grammar both CLIs speak (``python -m triton_backend_runtime`` and
``backend-packager``): exit codes, the ``--json`` document's format number, and how a failure
ends a command, one line ``PROG: error: PATH: DETAIL (CODE)`` on stderr (with ``--json`` also
``{"format": 1, "error": {...}}`` on stdout), never a traceback.

Kept in the runtime, which the packager already depends on (and which must not import the
packager), so that the two CLIs cannot drift apart.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..base import TrustError, describe, from_os_error

__all__ = [
    "EXIT_BROKEN_PIPE", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_TERMINATED", "EXIT_USAGE",
    "JSON_FORMAT", "Report", "Terminated", "add_verbosity", "exit_code", "fail", "internal_error", "parse",
    "pipe_closed", "run_command",
]

#: Success; a checked failure (a verdict, a finding); unusable input (``input.*``, usage).
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: 128 + SIGINT: Ctrl-C.
EXIT_INTERRUPTED = 130
#: 128 + SIGTERM: ``kill``, a service manager or a CI runner stopping the command.
EXIT_TERMINATED = 143
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


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt."""


def run_command(prog: str, args: argparse.Namespace, command: Callable[[], int],
                usage: tuple[type[TrustError], ...], on_signal: Callable[[], None] | None = None) -> int:
    """Run the parsed ``command`` and return its exit code. Every failure ends here: an
    ``input.*`` error or one of a ``usage`` class exits 2, any other :class:`TrustError` or
    OSError 1, Ctrl-C 130 and SIGTERM 143 (one line on stderr), a closed pipe 141, and an
    exception of no such class (a bug of ours) is ``error.internal``, its traceback shown
    only with ``-v``. ``on_signal`` runs as SIGINT or SIGTERM arrives, before the exception
    is raised: where it tells worker threads to stop, the command stops with them."""
    try:
        with _signals_raise(on_signal):
            return int(command())
    except KeyboardInterrupt as exc:
        return _interrupted(prog, exc)
    except BrokenPipeError:
        return pipe_closed()
    except TrustError as exc:
        return fail(prog, args, exc, exit_code(exc, usage))
    except OSError as exc:
        return fail(prog, args, from_os_error(exc), EXIT_FAILED)
    except Exception as exc:
        if getattr(args, "verbose", False):
            raise
        return fail(prog, args, internal_error(_command_name(args), exc), EXIT_FAILED)


@contextlib.contextmanager
def _signals_raise(on_signal: Callable[[], None] | None) -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt and SIGTERM :class:`Terminated` in the main thread,
    each after ``on_signal``; the handlers before are put back at the end. A signal ignored
    when the command started (``nohup``, a shell's background job) stays ignored; elsewhere
    than in the main thread (an embedding program's worker) none can be handled."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: object) -> None:
        if on_signal is not None:
            on_signal()
        raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt

    before = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)
              if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _interrupted(prog: str, exc: KeyboardInterrupt) -> int:
    """Say on stderr that the command stopped (over a progress line left on a terminal);
    130 for Ctrl-C, 143 for SIGTERM."""
    terminated = isinstance(exc, Terminated)
    with contextlib.suppress(OSError, ValueError):
        clear = "\r\x1b[K" if sys.stderr.isatty() else ""
        print(f"{clear}{prog}: interrupted ({'SIGTERM' if terminated else 'SIGINT'})", file=sys.stderr, flush=True)
    return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED


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
