"""Exception classes shared by the runtime and the packager.

Every error carries a short machine-readable ``code``, the ``path`` it is about (a file,
a wheel member, or a location inside a manifest such as ``$.artifacts[3].sha256``) and a
human ``detail``. ``str(err)`` is one readable line: ``path: detail``. Command-line tools
print that line and map the class to an exit code; they never show a traceback for these.
"""

from __future__ import annotations

__all__ = [
    "CacheError", "ConflictError", "FileError", "LoadError", "ManifestError", "PolicyError", "SelectionError",
    "SignatureError", "TrustError", "TrustStoreError", "VerifyError", "describe", "from_os_error", "printable",
]


def printable(text: str) -> str:
    """``text`` with every character a terminal or ``splitlines`` would act on (newlines,
    escapes, U+2028...) written as a Python escape: one visible line, never a forged one."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def describe(exc: BaseException, limit: int = 200) -> str:
    """An exception as one bounded line, for a detail that shows no traceback: its class and
    message, then what it was raised from or while handling, as Python's traceback would show
    it. Each message is cut at ``limit`` characters, its whitespace (newlines too) collapsed."""
    text = _class_and_message(exc, limit)
    cause = exc.__cause__ if exc.__cause__ is not None else None if exc.__suppress_context__ else exc.__context__
    return text if cause is None else f"{text} (caused by {_class_and_message(cause, limit)})"


def _class_and_message(exc: BaseException, limit: int) -> str:
    try:
        message = " ".join(str(exc).split())[:limit]
    except Exception:  # a hostile __str__: the class still says what happened
        message = "(unprintable)"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class TrustError(Exception):
    """Base class: an error about a specific file or manifest location."""

    code_prefix = "error"

    def __init__(self, code: str, path: str, detail: str) -> None:
        # The path may be a hostile member name: str() stays one line whatever it holds.
        super().__init__(printable(f"{path}: {detail}"))
        self.code = f"{self.code_prefix}.{code}"
        self.path = path
        self.detail = detail

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "path": self.path, "message": self.detail}


class ManifestError(TrustError):
    """A manifest that cannot be accepted: bad JSON, wrong types, wrong version, too big."""

    code_prefix = "manifest"


class SignatureError(TrustError):
    """A manifest whose signature is missing, malformed, untrusted or wrong."""

    code_prefix = "signature"


class TrustStoreError(TrustError):
    """A key file or trust configuration that cannot be read."""

    code_prefix = "trust"


class VerifyError(TrustError):
    """An installed backend or plugin that does not match its manifest, or this machine."""

    code_prefix = "verify"


class ConflictError(TrustError):
    """Two backends or plugins claiming the same name, target or symbol; one was set aside."""

    code_prefix = "conflict"


class LoadError(TrustError):
    """A backend admitted by policy whose modules failed to import."""

    code_prefix = "load"


class PolicyError(TrustError):
    """A backend the policy excludes (strict: not verified), or a bad policy setting."""

    code_prefix = "policy"


class SelectionError(TrustError, RuntimeError):
    """No driver could be selected. A RuntimeError too, as Triton's own selection error is."""

    code_prefix = "select"


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


class CacheError(TrustError):
    """A verification cache that cannot be used: unsafe owner or mode, malformed content."""

    code_prefix = "cache"
