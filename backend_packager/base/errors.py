"""Errors raised by the packager. Each carries a code, the path and the cause.

They share :class:`triton_backend_runtime.base.errors.TrustError` with the runtime, so one
``except`` clause in the CLI turns any of them into one readable line and an exit code.
"""

from __future__ import annotations

from triton_backend_runtime.base import FileError, ManifestError, TrustError, from_os_error

__all__ = ["ConfigError", "ElfError", "FileError", "InputError", "InstalledError", "KeylessError", "ManifestError",
           "TrustError", "WheelError", "from_os_error"]


class ElfError(TrustError):
    """A file that is not a supported ELF file: not ELF, truncated, 32-bit, foreign..."""

    code_prefix = "elf"


class InputError(TrustError):
    """A path given on the command line that cannot be used."""

    code_prefix = "input"


class InstalledError(TrustError):
    """An installed file that differs from its RECORD row, or that ``adopt`` will not read."""

    code_prefix = "installed"


class WheelError(TrustError):
    """A wheel that cannot be read or written: bad zip, bad RECORD, unsafe member..."""

    code_prefix = "wheel"


class ConfigError(TrustError):
    """Bad ``[tool.backend-packager]`` configuration."""

    code_prefix = "config"


class KeylessError(TrustError):
    """A Sigstore bundle that cannot be made or attached: sigstore missing, a signing that failed,
    a bundle that is not one or signs another statement (``docs/vendor/keyless.md``)."""

    code_prefix = "sigstore"
