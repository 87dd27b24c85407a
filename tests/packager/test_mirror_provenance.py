"""``mirror --upstream-identity``: PEP 740 provenance checked before a wheel is re-signed.

The upstream wheel is real: ``pypi_attestations-0.0.30-py3-none-any.whl`` as PyPI serves it, with
the provenance PyPI's trusted publishing made for it (``tests/data/pep740/README.md``), verified
offline against Sigstore's production root as sigstore-python ships it. A backend wheel built
here is attested by the local test Sigstore (:mod:`helpers.sigstoreca`): its CA, CT log and
Rekor-like log join the production root in the root sigstore-python's offline mode reads (its
TUF cache, under ``XDG_CACHE_HOME``), so one run verifies both, with sigstore's own verifier.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import sigstore
from helpers import index
from helpers.cli import doctor_json, runtime
from helpers.index import run_mirror, statuses
from helpers.sigstoreca import LocalSigstore, make_local_sigstore, pep740_provenance
from helpers.wheels import pip_install

from backend_packager.commands import mirror

DATA = Path(__file__).resolve().parents[1] / "data" / "pep740"
REAL = "pypi_attestations-0.0.30-py3-none-any.whl"
GITHUB = "https://token.actions.githubusercontent.com"
REAL_IDENTITY = "https://github.com/pypi/pypi-attestations/.github/workflows/release.yml@refs/tags/v0.0.30"
VENDOR = "https://github.com/vendor/legacy-ep-backend/.github/workflows/release.yml@refs/tags/v0.1"
#: sigstore-python's offline trust root: its TUF cache for the production instance.
TUF_DIR = Path("sigstore-python", "tuf", "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev")

wheels, keys = index.wheels, index.keys


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> LocalSigstore:
    return make_local_sigstore(tmp_path_factory.mktemp("local-sigstore"), tsa=False)


@pytest.fixture(autouse=True)
def offline_root(tmp_path: Path, local: LocalSigstore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The production root sigstore-python ships, with the local test Sigstore added, as the
    trust root its offline mode reads; this test's own cache, never the user's."""
    shipped = Path(sigstore.__file__).parent / "_store" / TUF_DIR.name / "trusted_root.json"
    root = json.loads(shipped.read_text())
    ours = json.loads(local.trusted_root_path.read_text())
    for field in ("tlogs", "certificateAuthorities", "ctlogs"):
        root[field] = root.get(field, []) + ours[field]
    cache = tmp_path / "xdg-cache"
    (cache / TUF_DIR).mkdir(parents=True)
    (cache / TUF_DIR / "trusted_root.json").write_text(json.dumps(root))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))


def attest(local: LocalSigstore, wheel: Path, identity: str) -> bytes:
    """A PEP 740 provenance object for ``wheel``: a publish attestation by ``identity``
    (GitHub Actions), signed and logged by the local Sigstore, converted by pypi-attestations."""
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return pep740_provenance(local, wheel.name, digest, identity=identity, issuer=GITHUB,
                             repository="vendor/legacy-ep-backend")


@pytest.fixture
def src(tmp_path: Path, wheels: dict[str, Path], local: LocalSigstore) -> Path:
    """The real attested wheel and a backend wheel attested by the vendor's CI, each with its
    ``.provenance`` beside it."""
    d = tmp_path / "src"
    d.mkdir()
    shutil.copy2(DATA / REAL, d / REAL)
    shutil.copy2(DATA / f"{REAL}.provenance", d / f"{REAL}.provenance")
    backend = shutil.copy2(wheels["backend"], d / wheels["backend"].name)
    (d / f"{backend.name}.provenance").write_bytes(attest(local, backend, VENDOR))
    return d


def upstream(*identities: str) -> list[str]:
    return [a for identity in identities for a in ("--upstream-identity", f"{GITHUB}={identity}")]


def by_name(doc: dict) -> dict[str, dict]:
    return {w["filename"]: w for w in doc["wheels"]}


def test_listed_identities_mirror_and_record_what_was_checked(src: Path, wheels: dict[str, Path], keys: tuple,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, doc, _ = run_mirror(src, out, keys[0], *upstream(REAL_IDENTITY, VENDOR))
    backend = wheels["backend"].name
    assert code == 0, doc
    assert statuses(doc) == {REAL: "copied", backend: "migrated"}
    rows = by_name(doc)
    assert rows[REAL]["upstream"] == [{"issuer": GITHUB, "identity": REAL_IDENTITY, "kind": "pep740"}]
    assert rows[backend]["upstream"] == [{"issuer": GITHUB, "identity": VENDOR, "kind": "pep740"}]
    # the copied wheel is PyPI's, byte for byte; the migrated one's manifest records its upstream
    assert (out / REAL).read_bytes() == (DATA / REAL).read_bytes()
    state = json.loads((out / mirror.STATE_FILE).read_text())
    assert state["entries"][REAL]["upstream"] == rows[REAL]["upstream"]
    # a re-run with the same wheels, provenance and identities changes nothing
    code, again, _ = run_mirror(src, out, keys[0], *upstream(REAL_IDENTITY, VENDOR))
    assert code == 0 and statuses(again) == {REAL: "unchanged", backend: "unchanged"}
    # the runtime: doctor shows the upstream identity of the installed distribution, list --json carries it
    site, home = tmp_path / "site", tmp_path / "home"
    home.mkdir()
    pip_install(Path(sys.executable), out / backend, site)
    text = runtime(site, keys[0], home, "doctor")
    assert f"upstream: {VENDOR} (issuer {GITHUB}, pep740: checked before the mirror re-signed it)" in text.stdout
    _, listed = doctor_json(site, keys[0], home)
    (row,) = [b for b in listed["backends"] if b["distribution"] == "legacy-ep-backend"]
    assert row["upstream"] == [{"issuer": GITHUB, "identity": VENDOR, "kind": "pep740"}]


def test_a_pattern_admits_every_tag_of_the_workflow(src: Path, keys: tuple, tmp_path: Path) -> None:
    tags = REAL_IDENTITY.rsplit("/", 1)[0] + "/*"
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], *upstream(tags, VENDOR))
    assert code == 0 and by_name(doc)[REAL]["upstream"][0]["identity"] == REAL_IDENTITY


def test_an_unlisted_identity_fails_that_wheel_alone(src: Path, wheels: dict[str, Path], keys: tuple,
                                                     tmp_path: Path) -> None:
    """PyPI's real attestation, by a workflow the platform does not list: that wheel fails, the
    vendor's wheel in the same run is mirrored."""
    out = tmp_path / "out"
    other = REAL_IDENTITY.replace("release.yml", "other.yml")
    code, doc, _ = run_mirror(src, out, keys[0], *upstream(other, VENDOR))
    backend = wheels["backend"].name
    assert code == 1
    assert statuses(doc) == {REAL: "failed", backend: "migrated"}
    error = by_name(doc)[REAL]["error"]
    assert error["code"] == "provenance.identity" and REAL_IDENTITY in error["message"]
    assert by_name(doc)[REAL]["served"] is False and not (out / REAL).exists()
    # never served, --pass-through-failures or not
    code, doc, _ = run_mirror(src, out, keys[0], "--pass-through-failures", *upstream(other, VENDOR))
    assert code == 1 and by_name(doc)[REAL]["served"] is False and not (out / REAL).exists()


def test_tampered_wheel_bytes_are_invalid(src: Path, wheels: dict[str, Path], keys: tuple, tmp_path: Path) -> None:
    data = bytearray((src / REAL).read_bytes())
    data[-30] ^= 1  # in the zip's end of central directory comment area: the same name, other bytes
    (src / REAL).write_bytes(bytes(data))
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], *upstream(REAL_IDENTITY, VENDOR))
    assert code == 1
    assert statuses(doc)[REAL] == "failed" and statuses(doc)[wheels["backend"].name] == "migrated"
    error = by_name(doc)[REAL]["error"]
    assert error["code"] == "provenance.invalid" and "digest" in error["message"]


def test_another_wheels_provenance_is_invalid(src: Path, wheels: dict[str, Path], keys: tuple,
                                              tmp_path: Path) -> None:
    """A valid attestation, by a listed identity, of another wheel (swapped in beside this one)."""
    backend = wheels["backend"].name
    shutil.copy2(src / f"{REAL}.provenance", src / f"{backend}.provenance")
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], *upstream(REAL_IDENTITY, VENDOR))
    assert code == 1 and statuses(doc) == {REAL: "copied", backend: "failed"}
    assert by_name(doc)[backend]["error"]["code"] == "provenance.invalid"


def test_no_provenance_while_identities_are_required_is_missing(src: Path, wheels: dict[str, Path], keys: tuple,
                                                                tmp_path: Path) -> None:
    shutil.copy2(wheels["pure"], src / wheels["pure"].name)
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], *upstream(REAL_IDENTITY, VENDOR))
    assert code == 1
    assert statuses(doc) == {REAL: "copied", wheels["backend"].name: "migrated", wheels["pure"].name: "failed"}
    assert by_name(doc)[wheels["pure"].name]["error"]["code"] == "provenance.missing"
    # without --upstream-identity no provenance is read: every wheel is mirrored as before
    code, doc, _ = run_mirror(src, tmp_path / "plain", keys[0])
    assert code == 0 and all(not w["upstream"] for w in doc["wheels"])


def test_garbage_provenance_is_invalid(src: Path, keys: tuple, tmp_path: Path) -> None:
    (src / f"{REAL}.provenance").write_text('{"version": 1, "attestation_bundles": "no"}')
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], *upstream(REAL_IDENTITY, VENDOR))
    assert code == 1 and by_name(doc)[REAL]["error"]["code"] == "provenance.invalid"


def test_a_source_index_serves_provenance_by_data_provenance(src: Path, wheels: dict[str, Path], keys: tuple,
                                                             tmp_path: Path) -> None:
    """PEP 740 in the simple API's HTML: the anchor's ``data-provenance``; an anchor without it
    serves none."""
    tree = tmp_path / "index"
    project = tree / "simple" / "pypi-attestations"
    project.mkdir(parents=True)
    shutil.copy2(src / REAL, project / REAL)
    shutil.copy2(src / f"{REAL}.provenance", project / "real.provenance")
    backend = wheels["backend"].name
    other = tree / "simple" / "legacy-ep-backend"
    other.mkdir()
    shutil.copy2(src / backend, other / backend)
    shutil.copy2(src / f"{backend}.provenance", other / f"{backend}.provenance")  # beside it, but not served
    (project / "index.html").write_text(f'<a href="{REAL}" data-provenance="real.provenance">{REAL}</a>\n')
    (other / "index.html").write_text(f'<a href="{backend}">{backend}</a>\n')
    code, doc, _ = run_mirror(tree, tmp_path / "out", keys[0], *upstream(REAL_IDENTITY, VENDOR))
    assert code == 1 and statuses(doc) == {REAL: "copied", backend: "failed"}
    assert by_name(doc)[REAL]["upstream"][0]["identity"] == REAL_IDENTITY
    assert by_name(doc)[backend]["error"]["code"] == "provenance.missing"


def test_a_bad_upstream_identity_is_a_usage_error(src: Path, keys: tuple, tmp_path: Path) -> None:
    for bad, why in (("no-equals-sign", "input.upstream-identity"), (f"{GITHUB}=https://github.com/*",
                     "trust.identity-format"), ("not a url=x", "trust.identity-format")):
        code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], "--upstream-identity", bad)
        assert (code, doc["error"]["code"]) == (2, why), bad
    assert not (tmp_path / "out").exists()


def pep691(*files: dict) -> str:
    return json.dumps({"meta": {"api-version": "1.1"}, "name": "x", "files": list(files)})


def test_a_source_index_serves_provenance_by_pep691_json(src: Path, wheels: dict[str, Path], keys: tuple,
                                                         tmp_path: Path) -> None:
    """PEP 740 in the simple API's JSON (PEP 691): each file's ``provenance`` URL, or null. The
    JSON is read where a project has both pages (its HTML here names no provenance); a page
    that is not PEP 691 JSON fails alone."""
    tree = tmp_path / "index"
    project = tree / "simple" / "pypi-attestations"
    project.mkdir(parents=True)
    shutil.copy2(src / REAL, project / REAL)
    shutil.copy2(src / f"{REAL}.provenance", project / "real.provenance")
    digest = hashlib.sha256((src / REAL).read_bytes()).hexdigest()
    (project / "index.json").write_text(pep691({"filename": REAL, "url": REAL, "hashes": {"sha256": digest},
                                                "provenance": "real.provenance"}))
    (project / "index.html").write_text(f'<a href="{REAL}">{REAL}</a>\n')
    backend = wheels["backend"].name
    other = tree / "simple" / "legacy-ep-backend"
    other.mkdir()
    shutil.copy2(src / backend, other / backend)
    shutil.copy2(src / f"{backend}.provenance", other / f"{backend}.provenance")  # beside it, but not served
    (other / "index.json").write_text(pep691({"filename": backend, "url": backend, "hashes": {}, "provenance": None}))
    broken = tree / "simple" / "broken"
    broken.mkdir()
    (broken / "index.json").write_text('{"meta": {"api-version": "1.0"}, "files": ' + "[" * 5000 + "]" * 5000 + "}")
    code, doc, _ = run_mirror(tree, tmp_path / "out", keys[0], *upstream(REAL_IDENTITY, VENDOR))
    assert code == 1
    assert statuses(doc) == {REAL: "copied", backend: "failed", "broken/index.json": "failed"}
    rows = by_name(doc)
    assert rows[REAL]["upstream"] == [{"issuer": GITHUB, "identity": REAL_IDENTITY, "kind": "pep740"}]
    assert rows[backend]["error"]["code"] == "provenance.missing"
    assert rows["broken/index.json"]["error"]["code"] == "mirror.page"
    assert "nested" in rows["broken/index.json"]["error"]["message"]


def test_a_pep691_page_is_checked_as_its_html_is(src: Path, keys: tuple, tmp_path: Path) -> None:
    """The JSON's sha256 must match the file; its name must be its URL's; a provenance URL
    leaving the tree fails that file; the wrong shape fails the page."""
    tree = tmp_path / "index"
    project = tree / "simple" / "pypi-attestations"
    project.mkdir(parents=True)
    shutil.copy2(src / REAL, project / REAL)
    renamed = REAL.replace("0.0.30", "0.0.31")
    shutil.copy2(src / REAL, project / renamed)
    shutil.copy2(src / REAL, project / REAL.replace("0.0.30", "0.0.32"))
    (project / "index.json").write_text(pep691(
        {"filename": REAL, "url": REAL, "hashes": {"sha256": "0" * 64}, "provenance": None},
        {"filename": REAL.replace("0.0.30", "0.0.9"), "url": renamed, "hashes": {}},
        {"filename": REAL.replace("0.0.30", "0.0.32"), "url": REAL.replace("0.0.30", "0.0.32"), "hashes": {},
         "provenance": "../../../../etc/passwd"}))
    wrong = tree / "simple" / "wrong"
    wrong.mkdir()
    (wrong / "index.json").write_text(pep691({"filename": REAL, "url": 12, "hashes": {}}))
    code, doc, _ = run_mirror(tree, tmp_path / "out", keys[0])
    assert code == 1
    codes = {w["filename"]: w["error"]["code"] for w in doc["wheels"] if w["error"]}
    assert codes == {REAL: "mirror.source-hash", renamed: "mirror.source",
                     REAL.replace("0.0.30", "0.0.32"): "mirror.source", "wrong/index.json": "mirror.page"}


def test_a_provenance_that_cannot_be_read_fails_that_wheel(src: Path, wheels: dict[str, Path], keys: tuple,
                                                           tmp_path: Path) -> None:
    """A provenance beside a wheel is read as inputs are: a symlink (to the right provenance,
    elsewhere) is not followed, a FIFO not waited on. Each is that wheel's
    ``provenance.unreadable`` (exit 1), not an ``input.*`` code that ends the run with exit 2."""
    backend = wheels["backend"].name
    elsewhere = Path(shutil.copy2(src / f"{REAL}.provenance", tmp_path / "elsewhere.provenance"))
    (src / f"{REAL}.provenance").unlink()
    (src / f"{REAL}.provenance").symlink_to(elsewhere)
    (src / f"{backend}.provenance").unlink()
    os.mkfifo(src / f"{backend}.provenance")
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], *upstream(REAL_IDENTITY, VENDOR))
    assert code == 1 and statuses(doc) == {REAL: "failed", backend: "failed"}
    rows = by_name(doc)
    assert rows[REAL]["error"]["code"] == rows[backend]["error"]["code"] == "provenance.unreadable"
    assert "input.symlink" in rows[REAL]["error"]["message"]
