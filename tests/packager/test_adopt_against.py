"""``adopt --against``: an installed distribution compared with the published wheel (a file,
or the same wheel in a simple index on disk, by file:// URL, or over HTTP), not only with
the RECORD on disk, which whoever edits an installed file can rewrite to match."""

from __future__ import annotations

import hashlib
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import adopted
from helpers.adopted import DIST_INFO, NAME, PACKAGE, cli_adopt, key_file, snapshot
from helpers.disttree import TrustEnv
from helpers.projects import record_hash, rezip

from backend_packager.base.errors import InputError
from backend_packager.commands import published

#: The fork backend's wheel, its pip install (pristine), a copy per test (site), a trust env.
fork_wheel, pristine, site, trust = adopted.fork_wheel, adopted.pristine, adopted.site, adopted.trust


def edit_and_cover(site: Path) -> Path:
    """Change an installed file and rewrite its RECORD row to match, as an attacker would."""
    path = site / PACKAGE / "compiler.py"
    data = path.read_bytes() + b"\nimport os  # planted\n"
    path.write_bytes(data)
    record = site / DIST_INFO / "RECORD"
    rel = f"{PACKAGE}/compiler.py"
    rows = [f"{rel},{record_hash(data)},{len(data)}" if line.startswith(f"{rel},") else line
            for line in record.read_text().splitlines()]
    record.write_text("\n".join(rows) + "\n")
    return path


def index_of(wheel: Path, root: Path, *, digest: str | None = None) -> Path:
    """A PEP 503 index on disk holding ``wheel`` (its page names the sha256 ``digest``, else the file's)."""
    project = root / "simple" / NAME
    project.mkdir(parents=True)
    shutil.copy2(wheel, root / wheel.name)
    digest = digest or hashlib.sha256(wheel.read_bytes()).hexdigest()
    (project / "index.html").write_text(f'<a href="../../{wheel.name}#sha256={digest}">{wheel.name}</a>\n')
    return root / "simple"


def test_plain_adopt_vouches_for_a_covered_edit_against_refuses_it(site: Path, trust: TrustEnv,
                                                                   fork_wheel: Path) -> None:
    path = edit_and_cover(site)
    before = snapshot(site)
    code, doc = cli_adopt(site, "--key", str(key_file(trust)), "--against", str(fork_wheel))
    assert code == 1
    (outcome,) = doc["distributions"]
    assert outcome["error"]["code"] == "installed.differs" and outcome["error"]["path"] == str(path)
    assert [m["path"] for m in outcome["mismatches"]] == [str(path)]
    assert snapshot(site) == before  # nothing written
    # what RECORD alone cannot tell: without --against the edited install is signed (documented)
    code, doc = cli_adopt(site, "--key", str(key_file(trust)))
    assert code == 0 and doc["distributions"][0]["status"] == "adopted"


def test_an_unedited_install_passes_and_again_after_adopt(site: Path, trust: TrustEnv, fork_wheel: Path) -> None:
    for status in ("adopted", "re-signed"):  # the entry points and manifest an adopt with this key wrote
        code, doc = cli_adopt(site, "--key", str(key_file(trust)), "--against", str(fork_wheel))
        assert code == 0 and doc["distributions"][0]["status"] == status, doc


def test_an_index_on_disk_by_path_and_file_url(site: Path, trust: TrustEnv, fork_wheel: Path,
                                               tmp_path: Path) -> None:
    index = index_of(fork_wheel, tmp_path / "index")
    for given in (str(index), index.as_uri()):
        code, doc = cli_adopt(site, "--key", str(key_file(trust)), "--against", given)
        assert code == 0, doc["distributions"][0]["error"]
    edit_and_cover(site)
    code, doc = cli_adopt(site, "--key", str(key_file(trust)), "--against", index.as_uri())
    assert code == 1 and doc["distributions"][0]["error"]["code"] == "installed.differs"


def test_another_release_or_a_wrong_hash_is_unusable(site: Path, trust: TrustEnv, fork_wheel: Path,
                                                     tmp_path: Path) -> None:
    bad_hash = index_of(fork_wheel, tmp_path / "bad", digest="0" * 64)
    other = rezip(fork_wheel, tmp_path / fork_wheel.name.replace("-1.0-", "-1.1-"), lambda m: _bump(m, "1.1"))
    missing = tmp_path / "empty" / "simple"
    (missing / NAME).mkdir(parents=True)
    (missing / NAME / "index.html").write_text("<html></html>")
    link = tmp_path / "link" / fork_wheel.name
    link.parent.mkdir()
    link.symlink_to(fork_wheel)
    for given, code in ((bad_hash, "input.against"), (other, "input.against"), (missing, "input.against"),
                        (link, "input.symlink"), (tmp_path / "nothing.whl", "wheel.missing")):
        done, doc = cli_adopt(site, "--key", str(key_file(trust)), "--against", str(given))
        assert doc["distributions"][0]["error"]["code"] == code, (given, doc)
        assert done == (2 if code.startswith("input.") else 1)


def _bump(members: dict[str, bytes], version: str) -> None:
    for name in list(members):
        data = members.pop(name)
        if name.endswith("/METADATA"):
            data = data.replace(b"Version: 1.0\n", f"Version: {version}\n".encode())
        members[name.replace("-1.0.dist-info", f"-{version}.dist-info")] = data


def test_a_published_wheel_at_odds_with_its_record_is_no_reference(site: Path, trust: TrustEnv, fork_wheel: Path,
                                                                    tmp_path: Path) -> None:
    """The wheel is hostile input too: members that disagree with its own RECORD refuse it."""
    lying = rezip(fork_wheel, tmp_path / fork_wheel.name,
                  lambda m: m.update({f"{PACKAGE}/compiler.py": m[f"{PACKAGE}/compiler.py"] + b"#"}), fix_record=False)
    code, doc = cli_adopt(site, "--key", str(key_file(trust)), "--against", str(lying))
    assert code == 1 and doc["distributions"][0]["error"]["code"] == "wheel.record"


@pytest.fixture
def served(fork_wheel: Path, tmp_path: Path) -> Iterator[str]:
    """The index served over HTTP on localhost: its URL."""
    root = tmp_path / "http"
    index_of(fork_wheel, root)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


def test_an_index_over_http(site: Path, trust: TrustEnv, served: str) -> None:
    code, doc = cli_adopt(site, "--key", str(key_file(trust)), "--against", served)
    assert code == 0, doc
    edit_and_cover(site)
    code, doc = cli_adopt(site, "--key", str(key_file(trust)), "--against", served)
    assert code == 1 and doc["distributions"][0]["error"]["code"] == "installed.differs"
    code, doc = cli_adopt(site, "--key", str(key_file(trust)), "--against", served + "nothing/")
    assert code == 2 and doc["distributions"][0]["error"]["code"] == "input.against"


def test_a_remote_page_naming_a_local_file_is_refused(fork_wheel: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError) as refused:
        published._fetch(fork_wheel.as_uri(), None, "https://index.example/simple/", tmp_path)
    assert refused.value.code == "input.against"
    with pytest.raises(InputError) as refused:  # and a page on disk naming a remote one
        published._fetch("https://index.example/x-1.0-py3-none-any.whl", None, str(tmp_path), tmp_path)
    assert refused.value.code == "input.against"
    for name in ("%00.whl", "%2e%2e.whl", "x%5cy.whl"):  # a downloaded file is named by its URL: a plain name
        with pytest.raises(InputError) as refused:
            published._fetch(f"https://index.example/{name}", None, None, tmp_path)
        assert refused.value.code == "input.against"


@pytest.mark.parametrize("answer", [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\n" + b"X: " + b"y" * 70000 + b"\r\n"])
def test_a_hostile_server_is_that_input_s_error(answer: bytes, tmp_path: Path) -> None:
    """A status line that is no HTTP, or a header line past http.client's limit:
    ``input.against``, never an exception of http.client's (not an OSError) as a traceback."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(answer)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with pytest.raises(InputError) as refused:
            published._download(f"http://127.0.0.1:{listener.getsockname()[1]}/simple/x/", 1 << 20)
        assert refused.value.code == "input.against"
    finally:
        thread.join()
        listener.close()
