"""The ``backend-packager`` command line.

Exit codes: 0 success; 1 the command ran and found a problem (a file failed to scan, a
wheel failed to verify); 2 bad usage (argparse's own convention) or unusable input, every
``input.*`` error.
130 Ctrl-C (SIGINT), 143 SIGTERM: the work stops within a second, its threads too, and
leaves no output.
Errors print as one line, ``backend-packager: error: PATH: DETAIL``, never a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence

from triton_backend_runtime.cli import parse, run_command

from .base import interrupt
from .clioutput import PROG, USAGE_ERRORS
from .cliparser import build_parser

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Every failure ends here as one line (and, with ``--json``, one
    object on stdout) and an exit code: never a traceback, unless ``-v`` asks for one."""
    args = parse(build_parser(), argv)
    interrupt.STOP.clear()
    return run_command(PROG, args, lambda: args.func(args), USAGE_ERRORS, on_signal=interrupt.STOP.set)
