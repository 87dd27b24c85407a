"""A source index is hostile input: its pages (PEP 503 HTML, PEP 691 JSON) and links, fuzzed.
Parsing gives links or one ``PageError``; resolving a link gives a path inside the source tree or that link's
``MirrorError``; reading a whole tree gives sources and per-link failures, never an
exception (``error.internal`` once ended a whole run for one NUL byte). ``FUZZ_EXAMPLES``
sets the number of examples (``make fuzz``)."""

from __future__ import annotations

import html
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from backend_packager.commands import mirror, mirrorsources
from backend_packager.formats import simpleindex

WHEEL = "demo-1.0-py3-none-any.whl"
T = TypeVar("T", str, bytes)
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))

pieces = st.sampled_from(["..", ".", "/", "%", "%00", "%ff", "%2e", "%2f", "\0", "\\", "#sha256=", "\x01", "é",
                          "a", "simple", "demo", WHEEL, "https://h/", "//h/", "?", ";", ":"])
hrefs = st.one_of(st.lists(pieces, max_size=12).map("".join), st.text(max_size=60),
                  st.integers(4000, 5000).map(lambda n: "../../" + "x" * n + ".whl"))


@settings(max_examples=EXAMPLES, deadline=None)
@given(page=st.one_of(st.text(max_size=400), st.lists(hrefs, max_size=5).map(
    lambda hs: "".join(f'<a href="{html.escape(h)}">x</a>' for h in hs))))
def test_links_never_raise_but_page_error(page: str) -> None:
    for link in links_or_none(simpleindex.links, page):
        assert link.sha256 is None or len(link.sha256) == 64


def links_or_none(parse: Callable[[T], list[simpleindex.Link]], page: T) -> list[simpleindex.Link]:
    """The page's links, or none where it is one ``PageError``; any other exception fails."""
    try:
        return parse(page)
    except simpleindex.PageError:
        return []


#: Any JSON value, huge numbers and deep lists included.
json_values = st.recursive(st.none() | st.booleans() | st.integers(-10**40, 10**40) | st.floats() | st.text(max_size=20)
                           | hrefs, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.sampled_from(["filename", "url", "hashes", "provenance", "sha256",
                                                              "meta", "api-version", "files", "x"]), inner, max_size=5),
                           max_leaves=30)
json_files = st.fixed_dictionaries({"filename": hrefs, "url": hrefs},
                                   optional={"hashes": st.dictionaries(st.sampled_from(["sha256", "md5"]),
                                                                       json_values | st.just("ab" * 32)),
                                             "provenance": json_values})
json_pages = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.builds(lambda version, files: json.dumps({"meta": {"api-version": version}, "files": files}).encode(),
              st.sampled_from(["1.0", "1.1", "2.0", "1", ""]) | json_values, st.lists(json_files | json_values,
                                                                                         max_size=4)),
    st.integers(1, 3000).map(lambda n: b'{"meta": {"api-version": "1.0"}, "files": ' + b"[" * n + b"]" * n + b"}"),
    st.integers(20, 5000).map(lambda n: b'{"meta": {"api-version": "1.0"}, "files": [' + b"9" * n + b"]}"),
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(page=json_pages)
def test_json_links_never_raise_but_page_error(page: bytes) -> None:
    """A PEP 691 page: hostile bytes, JSON of any shape, huge numbers, deep nesting."""
    for link in links_or_none(simpleindex.json_links, page):
        assert isinstance(link.href, str) and isinstance(link.filename, str) and "#" not in link.href
        assert link.sha256 is None or len(link.sha256) == 64
        assert link.provenance is None or isinstance(link.provenance, str)


@settings(max_examples=EXAMPLES, deadline=None)
@given(href=hrefs)
def test_a_link_resolves_inside_the_tree_or_fails_alone(href: str) -> None:
    root = Path("/srv/src")
    page = root / "simple" / "demo" / "index.html"
    try:
        name, path = mirrorsources._link_target(page, "simple/demo", href, root)
    except mirror.MirrorError as exc:
        assert exc.code.startswith("mirror.")
        return
    if name is not None:
        assert path.name == name and "\0" not in str(path)
        assert os.path.normpath(path) == str(path) and root in path.parents


@settings(max_examples=max(1, EXAMPLES // 5), deadline=None)
@given(links=st.lists(hrefs, min_size=1, max_size=6), as_json=st.booleans())
def test_a_tree_of_bad_links_gives_failures_never_an_exception(links: list[str], as_json: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "src"
        (root / "simple" / "demo").mkdir(parents=True)
        (root / WHEEL).write_bytes(b"PK not a wheel")
        page = root / "simple" / "demo" / ("index.json" if as_json else "index.html")
        if as_json:
            files = [{"filename": h.rsplit("/", 1)[-1], "url": h, "hashes": {}, "provenance": h} for h in links]
            page.write_text(json.dumps({"meta": {"api-version": "1.0"}, "files": files}))
        else:
            page.write_text("".join(f'<a href="{html.escape(h, quote=True)}">x</a>\n' for h in links),
                            errors="surrogatepass")
        sources, failures, _ = mirror.discover([root], Path(tmp) / "out")
        real = root.resolve()
        for source in sources:
            assert source.path.resolve().is_relative_to(real) and source.path.is_file()
        for failure in failures:
            assert failure.error is not None and failure.error["code"] != "mirror.internal"


def test_a_page_over_the_link_cap_fails_alone(tmp_path: Path) -> None:
    """A project page of more than MAX_LINKS links (JSON files or HTML anchors), or a JSON page
    of more than MAX_JSON_VALUES values, is that page's failure before it is parsed into
    objects; the other project's page is read. A page at the cap is read whole."""
    cap = simpleindex.MAX_LINKS
    entry = json.dumps({"filename": WHEEL, "url": WHEEL, "hashes": {}}).encode()
    root = tmp_path / "src"
    # counted before each entry is read: entries of any shape, the cheapest to parse
    pages = {"json-links": b'{"meta": {"api-version": "1.0"}, "files": [' + b"{}," * cap + b"{}]}",
             "html-links": f'<a href="{WHEEL}">x</a>\n'.encode() * (cap + 1),
             "json-values": b'{"meta": {"api-version": "1.0"}, "files": [' + b"{}," * simpleindex.MAX_JSON_VALUES
             + b"{}]}",
             "demo": f'<a href="{WHEEL}">x</a>\n'.encode()}
    for project, page in pages.items():
        (root / "simple" / project).mkdir(parents=True)
        (root / "simple" / project / ("index.html" if b"<a" in page[:5] else "index.json")).write_bytes(page)
    (root / "simple" / "demo" / WHEEL).write_bytes(b"PK not a wheel")
    sources, failures, _ = mirror.discover([root], tmp_path / "out")
    assert [s.filename for s in sources] == [WHEEL]
    found = {f.filename.split("/")[0]: f.error for f in failures}
    assert set(found) == {"json-links", "html-links", "json-values"}
    for project, error in found.items():
        assert error is not None and error["code"] == "mirror.page", error
        assert ("MAX_JSON_VALUES" if project == "json-values" else "MAX_LINKS") in error["message"]
    at_cap = b'{"meta": {"api-version": "1.0"}, "files": [' + b",".join([entry] * cap) + b"]}"
    assert len(simpleindex.json_links(at_cap)) == cap
