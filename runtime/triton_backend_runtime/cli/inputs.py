"""What the runtime's commands share: the program's name, input given on the command line
that cannot be used (exit 2, ``input.*``), and the public key files both CLIs read
(``trust add``, ``--trust``)."""

from __future__ import annotations

import argparse
import keyword
from typing import TYPE_CHECKING

from ..base import TrustError

if TYPE_CHECKING:
    from ..trust import PublicKey

__all__ = [
    "MAX_KEY_FILE", "MAX_PACKAGE_NAME", "PACKAGE_HELP", "PROG", "UnusableInput", "is_private_key", "package_arg",
    "public_key_file"
]


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


def public_key_file(path: str) -> tuple[str, list[PublicKey]]:
    """The text and the public keys of a key file named on the command line; anything else,
    a private key given by mistake included, is unusable input (``input.*``, exit 2)."""
    from ..base import RegularFileError, read_regular
    from ..trust import parse_key_file

    try:
        text = read_regular(path, MAX_KEY_FILE).decode("utf-8")
    except RegularFileError as exc:
        raise UnusableInput(exc.reason, path, exc.detail) from None
    except UnicodeDecodeError:
        raise UnusableInput("key", path, "cannot read key file: not UTF-8 text") from None
    if is_private_key(text):
        raise UnusableInput("key", path, "is a private key; pass the public key (.pub)")
    try:
        keys = parse_key_file(text, path)
    except TrustError as exc:
        raise UnusableInput("key", exc.path, f"{exc.detail} (a public key line as written by backend-packager "
                                             "keygen)") from None
    if not keys:
        raise UnusableInput("key", path, "the file holds no public key")
    return text, keys


def is_private_key(text: str) -> bool:
    """Whether ``text`` holds a PEM private key: keygen's PKCS#8 (plain or encrypted), or
    another tool's (``BEGIN EC PRIVATE KEY``...)."""
    return "-----BEGIN " in text and "PRIVATE KEY-----" in text
