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
the file's provenance object). Nothing else on the page is trusted; a page the
parser cannot read is one :class:`PageError`, never another exception.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import quote

__all__ = ["API_VERSION", "IndexFile", "Link", "PageError", "links", "pages"]

#: PEP 691 API version written in ``meta``.
API_VERSION = "1.0"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class IndexFile:
    """One file the index serves: its normalized project name (PEP 503), file name, sha256."""

    project: str
    filename: str
    sha256: str


@dataclass(frozen=True)
class Link:
    """One anchor of a PEP 503 page: the href without its fragment, the sha256 it names, and
    the URL of its PEP 740 provenance (``data-provenance``) as written, if any."""

    href: str
    sha256: str | None
    provenance: str | None = None


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
                self.hrefs.append((href, named.get("data-provenance") or None))


class PageError(ValueError):
    """A page the HTML parser gives up on (its own exceptions vary with the input)."""


def links(page: str) -> list[Link]:
    """The anchors of a PEP 503 page. A fragment ``sha256=<64 hex>`` is the file's hash; any
    other fragment (another algorithm, a malformed digest) gives none. Each href is
    returned as written: resolving it, and refusing what cannot be resolved, is the reader's."""
    parser = _Anchors()
    try:
        parser.feed(page)
        parser.close()
    except (AssertionError, ValueError, IndexError, RecursionError) as exc:
        raise PageError(f"not a readable HTML page ({type(exc).__name__})") from None
    found = []
    for href, provenance in parser.hrefs:
        url, _, fragment = href.partition("#")
        algo, _, digest = fragment.partition("=")
        digest = digest.lower()
        found.append(Link(url, digest if algo == "sha256" and _HEX64.match(digest) else None, provenance))
    return found
