"""Errors raised by the packager. Each carries a code, the path and the cause.

They share :class:`triton_backend_runtime.errors.TrustError` with the runtime, so one
``except`` clause in the CLI turns any of them into one readable line and an exit code.
"""

from __future__ import annotations

from triton_backend_runtime.errors import ManifestError, TrustError

__all__ = ["ConfigError", "ElfError", "FileError", "InputError", "InstalledError", "ManifestError", "TrustError",
           "WheelError", "from_os_error"]


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


class FileError(TrustError):
    """An operating system error on a file: no space, read-only, too big, permission...

    The code is the errno's name (``file.enospc``, ``file.erofs``, ``file.eacces``), so a
    script can tell a full disk from a missing file without parsing the message."""

    code_prefix = "file"


def from_os_error(exc: OSError, path: object = None) -> FileError:
    """``exc`` as a :class:`FileError` about ``path`` (default: the file the OS named)."""
    import errno

    name = errno.errorcode.get(exc.errno or 0, "oserror").lower()
    where = path if path is not None else (exc.filename if exc.filename is not None else "-")
    return FileError(name, str(where), exc.strerror or str(exc))
