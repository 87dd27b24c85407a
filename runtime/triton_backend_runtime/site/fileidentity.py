"""A file's identity: what the verdict cache, the hash cache and the core check compare, so
that "this is the file that was verified" means one thing everywhere (device, inode, size and
both timestamps; a rewrite in place changes the last two)."""

from __future__ import annotations

import os

__all__ = ["identity", "identity_text", "same_file", "stat_identity"]


def identity(st: os.stat_result) -> list[object]:
    """A file's identity for the caches: (device, inode, size, mtime_ns, ctime_ns)."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def stat_identity(path: str) -> list[object] | None:
    try:
        return identity(os.stat(path))
    except (OSError, ValueError):
        return None


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file or directory: the same device and inode, or, where
    either cannot be stat-ed, the same path once symlinks are resolved. A path with a NUL
    (which no file has) is only itself."""
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        pass
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def identity_text(path: str) -> str | None:
    """The identity of ``path`` as the cache stores it; None when it cannot be stat-ed."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
