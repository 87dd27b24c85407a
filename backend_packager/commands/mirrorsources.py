"""The input wheels of a mirror run: every ``*.whl`` of a directory, or every wheel a simple
index on disk links to (hrefs resolved as URLs, confined to the source tree), one source per
file name; an input or link that cannot be used is that input's failure.

A project directory of the index is read from its PEP 691 ``index.json`` when it has one,
else from its PEP 503 ``index.html``: the JSON carries the same links, hashes and PEP 740
provenance URLs, typed (a mirror's own output serves both, with the same data)."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from triton_backend_runtime.base import canonicalize_name

from ..base import InputError, TrustError
from ..formats import simpleindex
from .confined import open_confined, read_confined, symlink_error
from .mirrorrecords import INDEX_DIR, MirrorError, Result, Source, failure
from .mirrorstate import plain_wheel_name
from .upstream import PROVENANCE_SUFFIX as PROVENANCE

__all__ = ["MAX_HREF", "MAX_PAGE_BYTES", "discover", "unique"]

#: Bounds on what is read back of a source index page.
MAX_PAGE_BYTES = 16 << 20
#: A link longer than this is no link to a wheel of the tree (PATH_MAX is 4096).
MAX_HREF = 4096


def discover(roots: list[Path], outdir: Path) -> tuple[list[Source], list[Result], list[str]]:
    """The input wheels of every root, the inputs and links that cannot be used (as
    failures), and warnings. A root that is not a directory, or is ``outdir`` or inside it,
    is refused."""
    sources: list[Source] = []
    failures: list[Result] = []
    warnings: list[str] = []
    out = outdir.resolve()
    for root in roots:
        if not root.is_dir():
            raise InputError("missing", str(root), "not a directory of wheels or a simple index")
        real = root.resolve()
        if real == out or out in real.parents:
            raise InputError("output", str(root), "the source is the output directory or inside it")
        index = _index_dir(root)
        if index is None:
            found, bad = _wheel_dir(root)
        else:
            found, bad, skipped = _simple_tree(index, root)
            if skipped:
                warnings.append(f"{index}: {skipped} non-wheel files ignored")
        sources += found
        failures += bad
    return sources, failures, warnings


def _index_dir(root: Path) -> Path | None:
    """``root/simple`` or ``root`` itself when it holds project pages and no wheel."""
    if (root / INDEX_DIR / "index.html").is_file() or (root / INDEX_DIR).is_dir():
        return root / INDEX_DIR
    if not any(root.glob("*.whl")) and (any(root.glob("*/index.html")) or any(root.glob("*/index.json"))):
        return root
    return None


def _wheel_dir(root: Path) -> tuple[list[Source], list[Result]]:
    """Every ``*.whl`` entry of ``root``: a regular file is a source; a symlink (to a private
    key, say) or anything else is that entry's failure, never followed, never served."""
    sources: list[Source] = []
    failures: list[Result] = []
    confine = root.resolve()
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not entry.name.endswith(".whl"):
            continue
        path = root / entry.name
        if entry.is_symlink():
            failures.append(failure(entry.name, str(path), symlink_error(str(path))))
        elif not entry.is_file(follow_symlinks=False):
            failures.append(failure(entry.name, str(path), InputError(
                "not-a-file", str(path), "not a regular file (a directory, FIFO or device): not mirrored")))
        else:
            _add_source(path, entry.name, None, confine, sources, failures, path.with_name(entry.name + PROVENANCE))
    return sources, failures


def _add_source(path: Path, filename: str, sha256: str | None, root: Path, sources: list[Source],
                failures: list[Result], provenance: Path | None = None, named: bool = False) -> None:
    """A wheel whose file name says its project (PEP 427), a plain name of a file in OUTDIR;
    any other name is this file's failure. ``provenance``: where its PEP 740 provenance is
    (``named``: a source index names it, so it must be there)."""
    where = str(path)
    if not plain_wheel_name(filename):
        failures.append(failure(filename[:255], where, MirrorError("filename", where, "not a plain wheel file "
                                                                    "name (a slash, a NUL, a leading dot)")))
        return
    try:
        name = parse_wheel_filename(filename)[0]
    except InvalidWheelFilename as exc:
        failures.append(failure(filename, where, MirrorError("filename", where, str(exc))))
        return
    sources.append(Source(path, filename, canonicalize_name(name), sha256, root, provenance, named))


def _simple_tree(index: Path, root: Path) -> tuple[list[Source], list[Result], int]:
    """Every wheel the project pages under ``index`` link to. A link is resolved as a URL is
    (relative to the page's own URL, ``..`` lexically), must stay inside ``root`` and name a
    regular file there, reached without a symlink as its last part. Any link that cannot be
    used (a remote URL, a NUL byte, bad percent-encoding, an overlong href, a symlink) is
    that link's failure; the others are mirrored (an index is data: it names no path of its own).
    A page links its own project's files only: a wheel of another project (by its file name)
    is that link's failure, never a source, so it cannot shadow that project's own wheel."""
    confine = root.resolve()
    sources: list[Source] = []
    failures: list[Result] = []
    skipped = 0
    for page in _project_pages(index):
        try:
            found = _page_links(page, confine)
        except (TrustError, simpleindex.PageError) as exc:
            error = exc if isinstance(exc, TrustError) else MirrorError("page", str(page), str(exc))
            failures.append(failure(f"{page.parent.name}/{page.name}", str(page), error))
            continue
        base = os.path.relpath(page.parent, root)
        project = canonicalize_name(page.parent.name)
        for link in found:
            try:
                name, path = _link_target(page, base, link.href, root)
            except MirrorError as exc:
                failures.append(failure(_link_name(link.href), f"{page}: {link.href[:200]}", exc))
                continue
            if name is None:
                skipped += 1
                continue
            if link.filename is not None and link.filename != name:
                failures.append(failure(name, f"{page}: {link.href[:200]}", MirrorError(
                    "source", str(page), f"the page names the file {link.filename[:200]!r}, its URL {name!r}")))
                continue
            try:
                provenance = _provenance_target(page, base, link.provenance, root)
            except MirrorError as exc:
                failures.append(failure(name, f"{page}: {link.provenance}"[:400], exc))
                continue
            before = len(failures)
            _add_source(path, name, link.sha256, confine, sources, failures, provenance, provenance is not None)
            if len(failures) == before and (refused := _unusable(sources[-1], project, confine)) is not None:
                sources.pop()
                failures.append(failure(name, f"{page}: {link.href[:200]}", refused))
    return sources, failures, skipped


def _unusable(source: Source, project: str, confine: Path) -> TrustError | None:
    """Why a page's link cannot be mirrored: its file cannot be opened inside the tree, or it
    is a wheel of another project than the page's (a tenant's page naming a file of another
    project would otherwise take part in choosing which file serves that name); else None."""
    try:
        os.close(open_confined(source.path, confine)[0])
    except TrustError as exc:
        return exc
    if source.project != project:
        return MirrorError("source", str(source.path), f"a wheel of the project {source.project!r} linked from the "
                                                       f"page of {project[:200]!r}: a page links its own project's "
                                                       "files only")
    return None


def _project_pages(index: Path) -> list[Path]:
    """One page per project directory under ``index``, by directory name: its ``index.json``
    (PEP 691) where there is one, else its ``index.html`` (PEP 503)."""
    pages: dict[Path, Path] = {}
    for page in [*index.glob("*/index.html"), *index.glob("*/index.json")]:
        if page.name == "index.json" or page.parent not in pages:
            pages[page.parent] = page
    return [pages[d] for d in sorted(pages)]


def _page_links(page: Path, confine: Path) -> list[simpleindex.Link]:
    data = read_confined(page, confine, MAX_PAGE_BYTES)
    if page.name == "index.json":
        return simpleindex.json_links(data)
    return simpleindex.links(data.decode("utf-8", "replace"))


def _link_name(href: str) -> str:
    """The file name a link ends with, printable and bounded, for its failure's report."""
    name = href.split("#", 1)[0].rsplit("/", 1)[-1]
    return "".join(c if c.isprintable() else "?" for c in name)[:200] or "?"


def _provenance_target(page: Path, base: str, href: str | None, root: Path) -> Path | None:
    """The file a link's ``data-provenance`` (PEP 740) names, resolved as its href is; None
    without one. A URL that cannot be used is the wheel's failure, as a bad href is."""
    if href is None:
        return None
    return _resolve(f"{page}: {href[:200]}", base, href, root)[1]


def _link_target(page: Path, base: str, href: str, root: Path) -> tuple[str | None, Path]:
    """(file name, path inside ``root``) of a relative link; (None, ...) for a link to no wheel."""
    return _resolve(f"{page}: {href[:200]}", base, href, root, wheels_only=True)


def _resolve(where: str, base: str, href: str, root: Path, wheels_only: bool = False) -> tuple[str | None, Path]:
    """(file name, path inside ``root``) of a relative URL of a page under ``base``; with
    ``wheels_only``, (None, ``root``) for a URL naming no wheel, before it is checked further."""
    if len(href) > MAX_HREF:
        raise MirrorError("source", where, f"a link of {len(href)} characters (more than {MAX_HREF})")
    parts = urlsplit(href)
    if parts.scheme or parts.netloc:
        raise MirrorError("source", where, "a remote URL: only files on disk are mirrored")
    try:
        rel = unquote(parts.path, errors="strict")
    except UnicodeDecodeError:
        raise MirrorError("source", where, "bad percent-encoding (not UTF-8)") from None
    name = rel.rsplit("/", 1)[-1]
    if wheels_only and not name.endswith(".whl"):
        return None, root
    if any(not c.isprintable() for c in rel) or "\\" in rel:
        raise MirrorError("source", where, "a NUL, control character or backslash in the link")
    joined = posixpath.normpath(posixpath.join(base, rel))
    if rel.startswith("/") or joined == ".." or joined.startswith("../"):
        raise MirrorError("source", where, f"the link leaves the source tree {root}")
    return name, root / joined


def unique(sources: list[Source]) -> tuple[list[Source], list[Result]]:
    """One source per file name: the first file wins and another file of that name fails.
    Links to one file (one inode) are one source; the sha256 they name must agree, whatever their order."""
    seen: dict[str, Source] = {}
    failures: dict[str, Result] = {}
    for source in sources:
        first = seen.setdefault(source.filename, source)
        if first is source:
            continue
        if not _hard_links(first.path, source.path):
            error = MirrorError("duplicate", str(source.path), f"another source already provides {source.filename} "
                                f"({first.path}); this one is ignored")
            failures[f"{source.path}"] = failure(source.filename, str(source.path), error)
        elif first.expected_sha256 and source.expected_sha256 and first.expected_sha256 != source.expected_sha256:
            error = MirrorError("source-hash", str(source.path), "the index pages name different sha256 for this file")
            failures[source.filename] = failure(source.filename, str(source.path), error)
        elif source.expected_sha256:
            seen[source.filename] = source
    kept = [s for name, s in seen.items() if name not in failures]
    return kept, list(failures.values())


def _hard_links(a: Path, b: Path) -> bool:
    """One file under two names (a mirror's pages link the hard links beside them, an old
    page the outputs above): same device and inode of the names themselves (``lstat``: a
    symlink is not the file it names, unlike the runtime's ``verdictcache.same_file``)."""
    try:
        return os.path.samestat(os.lstat(a), os.lstat(b))
    except OSError:
        return a.resolve() == b.resolve()
