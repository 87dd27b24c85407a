"""What the runtime's commands share: the program's name, and input given on the command line
that cannot be used (exit 2, ``input.*``)."""

from __future__ import annotations

import argparse
import keyword
from typing import TYPE_CHECKING

from ..base import TrustError

if TYPE_CHECKING:
    pass


PROG = "python -m triton_backend_runtime"


#: A key file is one line per key; anything bigger is not one (the packager's bound too).
MAX_KEY_FILE = 1 << 20


#: The longest --package accepted (discovery reads package names up to this length).
MAX_PACKAGE_NAME = 100


PACKAGE_HELP = ("the import name of the Triton to examine, for a vendor release that renames the package "
                "(group NAME.backends); default: %(default)s")


class UnusableInput(TrustError):
    """A file or value given on the command line that cannot be used: exit 2. Its codes are
    the packager's ``input.*`` where they mean the same (``input.missing``,
    ``input.not-a-file``, ``input.too-big``...)."""

    code_prefix = "input"


def package_arg(args: argparse.Namespace) -> str:
    """``--package``: the import name of the Triton to examine; anything else is unusable input."""
    name: str = args.package
    if not name.isidentifier() or keyword.iskeyword(name) or len(name) > MAX_PACKAGE_NAME:
        raise UnusableInput("name", "--package", f"{name[:80]!r} is not a Python package name (an identifier, "
                                                 "as a Triton is imported: triton, vendor_triton)")
    return name
