"""A child that takes Ctrl-C as a terminal's foreground job does.

A test run started in the background (``make test &``, some CI shells) inherits SIGINT
ignored, and so would every child: Python then installs no KeyboardInterrupt handler, and a
test of what Ctrl-C does would test nothing. ``preexec_fn=sigint_default`` gives the child
the default disposition back.
"""

from __future__ import annotations

import signal


def sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
