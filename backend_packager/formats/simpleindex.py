"""The simple repository API on disk: PEP 503 HTML pages and PEP 691 JSON beside them.

Writing (:func:`pages`) is a pure function from the files a mirror serves to the bytes of
every page, so a re-run that serves the same files produces the same bytes and nothing is
rewritten. Layout, for an index at ``OUTDIR/simple`` with the wheels in ``OUTDIR``:

- ``simple/index.html`` and ``simple/index.json``: every project (PEP 503 root, PEP 691
  ``application/vnd.pypi.simple.v1+json`` project list);
- ``simple/<normalized name>/index.html`` and ``index.json``: one anchor per file, its URL
  ``<file name>`` relative to the page, with ``#sha256=<hex>`` (PEP 503), and the same as
  PEP 691 ``files``: each wheel is served beside its project page, inside the index tree,
  so that one rename replaces pages and wheels together (:mod:`backend_packager.commands.mirrorindex`).

pip reads ``index.html`` from a ``file://`` directory URL; the JSON is for clients that ask
for PEP 691 (a web server in front of the tree can serve it by content negotiation).
PEP 629's ``pypi:repository-version`` meta tag is set to 1.0.

Reading (:func:`links`) parses a PEP 503 project page of a source index: the anchors' hrefs,
the ``sha256`` fragment each may carry, and PEP 740's ``data-provenance`` attribute (the URL of
the file's provenance object). :func:`json_links` reads the PEP 691 JSON form of the same
page (``files``: ``filename``, ``url``, ``hashes``, and PEP 740's ``provenance`` URL or
null), parsed within the runtime's JSON bounds (size, depth, number length). A project
directory holding both is read from its JSON: it carries the same data, typed, with no
markup to guess at. Nothing else on a page is trusted; a page the parser cannot read is one
:class:`PageError`, never another exception. Either kind gives at most :data:`MAX_LINKS`
links (a JSON page also at most :data:`MAX_JSON_VALUES` values, counted before parsing): a
page over either is one :class:`PageError`, so one page cannot take hundreds of MB to read.
"""

from __future__ import annotations

import html
import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

from triton_backend_runtime.base import TrustError, jsonlimits

__all__ = ["API_VERSION", "MAX_JSON_VALUES", "MAX_LINKS", "IndexFile", "Link", "PageError", "json_links", "links",
           "pages"]

#: PEP 691 API version written in ``meta``.
API_VERSION = "1.0"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
#: Links (HTML anchors, JSON ``files``) one project page may give: more files than any
#: project on PyPI has. 16 MiB of bare anchors is ~1.6 million, ~340 MB and 13 s to parse.
MAX_LINKS = 100_000
#: JSON values one PEP 691 page may hold (containers and the commas between elements, before
#: parsing): a PyPI file entry is ~14, a minimal one 5; 16 MiB of ``{}`` is ~5.6 million (~485 MB parsed).
MAX_JSON_VALUES = 1_000_000
#: Where an HTML anchor may start: ``<a`` and a character that ends a tag name for
#: :class:`html.parser.HTMLParser` (an upper bound on the anchors it finds, counted in C).
_ANCHOR_START = re.compile(r"<a[\t\n\r\f />\x00]", re.IGNORECASE)


@dataclass(frozen=True)
class IndexFile:
    """One file the index serves: its normalized project name (PEP 503), file name, sha256."""

    project: str
    filename: str
    sha256: str


@dataclass(frozen=True)
class Link:
    """One anchor of a PEP 503 page (or file of a PEP 691 page): the href without its
    fragment, the sha256 it names, the URL of its PEP 740 provenance as written, if any, and
    the file name a PEP 691 page gives (None from HTML, where the href's last part is the name)."""

    href: str
    sha256: str | None
    provenance: str | None = None
    filename: str | None = None


def pages(files: Iterable[IndexFile]) -> dict[str, bytes]:
    """Every page of the index, by path relative to the index root (``index.html``,
    ``<project>/index.json``, ...), projects and files sorted so the bytes are stable."""
    by_project: dict[str, list[IndexFile]] = {}
    for item in files:
        by_project.setdefault(item.project, []).append(item)
    out: dict[str, bytes] = {}
    for project, items in sorted(by_project.items()):
        items = sorted(items, key=lambda f: f.filename)
        out[f"{project}/index.html"] = _project_html(project, items)
        out[f"{project}/index.json"] = _project_json(project, items)
    out["index.html"] = _root_html(sorted(by_project))
    out["index.json"] = _json({"meta": {"api-version": API_VERSION}, "projects": [{"name": p} for p in
                                                                                   sorted(by_project)]})
    return out


def _file_url(filename: str) -> str:
    return quote(filename)


def _page(title: str, anchors: list[str]) -> bytes:
    body = "\n".join(anchors)
    return (
        "<!DOCTYPE html>\n<html>\n<head>\n<meta name=\"pypi:repository-version\" content=\"1.0\">\n"
        f"<title>{html.escape(title)}</title>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    ).encode()


def _root_html(projects: list[str]) -> bytes:
    anchors = [f'<a href="{quote(p)}/">{html.escape(p)}</a><br>' for p in projects]
    return _page("Simple index", anchors)


def _project_html(project: str, files: list[IndexFile]) -> bytes:
    anchors = [
        f'<a href="{html.escape(_file_url(f.filename))}#sha256={f.sha256}">{html.escape(f.filename)}</a><br>'
        for f in files
    ]
    return _page(f"Links for {project}", anchors)


def _project_json(project: str, files: list[IndexFile]) -> bytes:
    return _json({
        "meta": {"api-version": API_VERSION},
        "name": project,
        "files": [{"filename": f.filename, "url": _file_url(f.filename), "hashes": {"sha256": f.sha256}}
                  for f in files],
    })


def _json(doc: object) -> bytes:
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            named = dict(attrs)
            href = named.get("href")
            if href:
                if len(self.hrefs) >= MAX_LINKS:
                    raise _TooManyLinks
                self.hrefs.append((href, named.get("data-provenance") or None))


class _TooManyLinks(Exception):
    pass


class PageError(ValueError):
    """A page the parser gives up on: HTML it cannot read (its exceptions vary with the input),
    or JSON that is not a PEP 691 project page."""


class _JsonPageError(TrustError):
    code_prefix = "page"


def links(page: str) -> list[Link]:
    """The anchors of a PEP 503 page. A fragment ``sha256=<64 hex>`` is the file's hash; any
    other fragment (another algorithm, a malformed digest) gives none. Each href is
    returned as written: resolving it, and refusing what cannot be resolved, is the reader's."""
    if sum(1 for _ in itertools.islice(_ANCHOR_START.finditer(page), MAX_LINKS + 1)) > MAX_LINKS:
        raise PageError(_too_many("anchors"))
    parser = _Anchors()
    try:
        parser.feed(page)
        parser.close()
    except _TooManyLinks:
        raise PageError(_too_many("anchors")) from None
    except (AssertionError, ValueError, IndexError, RecursionError) as exc:
        raise PageError(f"not a readable HTML page ({type(exc).__name__})") from None
    found = []
    for href, provenance in parser.hrefs:
        url, _, fragment = href.partition("#")
        algo, _, digest = fragment.partition("=")
        digest = digest.lower()
        found.append(Link(url, digest if algo == "sha256" and _HEX64.match(digest) else None, provenance))
    return found


def json_links(data: bytes) -> list[Link]:
    """The files of a PEP 691 project page (API version 1.x), in page order. ``hashes.sha256``
    of 64 hex digits is the file's hash (any other gives none, as a fragment does in HTML);
    ``provenance`` (PEP 740) is a URL or null. A page that is not such JSON, or a file entry
    of the wrong shape, is one :class:`PageError`."""
    try:
        doc = jsonlimits.loads(data, "index.json", _JsonPageError, limit=len(data),
                               max_values=(MAX_JSON_VALUES, "MAX_JSON_VALUES"))
    except _JsonPageError as exc:
        raise PageError(f"not a readable PEP 691 page ({exc.detail[:200]})") from None
    version = _field(_field(doc, "meta", dict, "the page"), "api-version", str, "meta")
    if version.split(".")[0] != "1":
        raise PageError(f"PEP 691 API version {version[:20]!r}: only 1.x is read")
    files = _field(doc, "files", list, "the page")
    if len(files) > MAX_LINKS:
        raise PageError(_too_many("files"))
    return [_json_link(item, n) for n, item in enumerate(files)]


def _too_many(what: str) -> str:
    return f"more than {MAX_LINKS:,} {what} (MAX_LINKS): not read"


def _json_link(item: Any, n: int) -> Link:
    where = f"files[{n}]"
    if not isinstance(item, dict):
        raise PageError(f"{where} is not an object")
    filename = _field(item, "filename", str, where)
    url = _field(item, "url", str, where)
    hashes = _field(item, "hashes", dict, where)
    provenance = item.get("provenance")
    if provenance is not None and not isinstance(provenance, str):
        raise PageError(f"{where}.provenance is neither a URL nor null")
    digest = hashes.get("sha256")
    digest = digest.lower() if isinstance(digest, str) else ""
    return Link(url.partition("#")[0], digest if _HEX64.match(digest) else None, provenance or None, filename)


_JSON_TYPES: dict[type, str] = {list: "array", dict: "object", str: "string"}


def _field(doc: Any, key: str, kind: type, where: str) -> Any:
    value = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(value, kind):
        raise PageError(f"{where}: {key!r} missing or not a JSON {_JSON_TYPES[kind]}")
    return value
