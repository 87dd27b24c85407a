"""Where an installed distribution came from, as its installer recorded it: PEP 610's
``direct_url.json`` in the ``.dist-info``.

Read for the advice of ``conflict.files`` (ownership): the distribution kept is reinstalled
from the archive it was installed from, not from whatever an index serves under its name
today (perhaps an unsigned build of it). The file is hostile input like every file in a
site: read within a bound, never through a symbolic link, never blocking on a FIFO, and
nothing is raised out of it. Only an archive (``archive_info``) at an ``http(s)`` URL or a
local path of printable ASCII is a source; anything else is None, "source unknown". An
install from an index leaves no such file at all: pip does not record the index.
"""

from __future__ import annotations

import json
import os

from ..base import TrustError, read_regular

__all__ = ["DIRECT_URL", "MAX_BYTES", "MAX_SOURCE_CHARS", "install_source", "source_of"]

#: pip writes well under 1 KiB: a URL and a hash.
MAX_BYTES = 16 << 10
#: Longer sources are not printed: the advice is one line of a report.
MAX_SOURCE_CHARS = 400
DIRECT_URL = "direct_url.json"
_SCHEMES = ("http", "https", "file")


def install_source(dist_info: str) -> str | None:
    """What to give ``pip install`` to reinstall the archive ``dist_info`` was installed from:
    a local path for a ``file:`` URL, else the URL; None when unknown or unfit to print."""
    path = os.path.join(dist_info, DIRECT_URL)
    try:
        data = read_regular(path, MAX_BYTES, follow_symlinks=False)
    except TrustError:  # RegularFileError: missing, a FIFO, a link, too big
        return None
    try:  # within MAX_BYTES the parser's own recursion limit is the only depth bound needed
        record = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past the limit
        return None
    if not isinstance(record, dict) or not isinstance(record.get("archive_info"), dict):
        return None  # an index, a directory or a VCS checkout: no one archive to name
    url = record.get("url")
    return source_of(url) if isinstance(url, str) else None


def source_of(url: str) -> str | None:
    """The ``pip install`` argument for an archive URL, or None."""
    # Imported here: only a conflict reads a direct_url.json; ``import triton`` does not pay.
    from urllib.parse import unquote, urlsplit

    if not _plain(url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:  # a bad IPv6 netloc
        return None
    if parts.scheme not in _SCHEMES:
        return None
    if parts.scheme != "file":
        return url if parts.netloc else None
    local = unquote(parts.path)
    fits = parts.netloc in ("", "localhost") and local.startswith("/") and "\x00" not in local
    return local if fits and _plain(local) else None


def _plain(text: str) -> bool:
    """Printable ASCII within the bound: nothing a terminal acts on, nothing that looks alike."""
    return 0 < len(text) <= MAX_SOURCE_CHARS and text.isascii() and text.isprintable()
