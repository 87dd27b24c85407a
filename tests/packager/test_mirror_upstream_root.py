"""``mirror --upstream-root FILE``: upstream PEP 740 attestations verified against a pinned
Sigstore trust root (an air-gapped or private Sigstore), not Sigstore's production root.

The root is the local test Sigstore's (:mod:`helpers.sigstoreca`); sigstore-python's own
offline root (its TUF cache, under ``XDG_CACHE_HOME``) is this test's, seeded from the
production root it ships, so a pass can only come from the pinned root. The wheels are built
by the test helpers; PyPI's real attestation (``tests/data/pep740``), made for the production
root, does not verify against this one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from helpers import index
from helpers.index import run_mirror, statuses
from helpers.projects import rezip
from helpers.sigstoreca import LocalSigstore, make_local_sigstore, pep740_provenance

from backend_packager.commands import mirror

DATA = Path(__file__).resolve().parents[1] / "data" / "pep740"
REAL = "pypi_attestations-0.0.30-py3-none-any.whl"
GITHUB = "https://token.actions.githubusercontent.com"
VENDOR = "https://github.com/vendor/legacy-ep-backend/.github/workflows/release.yml@refs/tags/v0.1"
PURE = "https://github.com/vendor/pure/.github/workflows/release.yml@refs/tags/v1.0"

wheels, keys = index.wheels, index.keys


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> LocalSigstore:
    return make_local_sigstore(tmp_path_factory.mktemp("private-sigstore"), seed="private", tsa=False)


@pytest.fixture(autouse=True)
def no_default_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sigstore-python's offline caches: this test's own, empty (never the user's)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def attest(local: LocalSigstore, wheel: Path, identity: str, *, digest: str | None = None) -> bytes:
    return pep740_provenance(local, wheel.name, digest or sha(wheel), identity=identity, issuer=GITHUB)


@pytest.fixture
def src(tmp_path: Path, wheels: dict[str, Path], local: LocalSigstore) -> Path:
    """A backend wheel and a pure wheel, each attested by the private Sigstore beside it."""
    d = tmp_path / "src"
    d.mkdir()
    for kind, identity in (("backend", VENDOR), ("pure", PURE)):
        wheel = Path(shutil.copy2(wheels[kind], d / wheels[kind].name))
        (d / f"{wheel.name}.provenance").write_bytes(attest(local, wheel, identity))
    return d


def pinned(local: LocalSigstore, *identities: str) -> list[str]:
    listed = [a for i in identities for a in ("--upstream-identity", f"{GITHUB}={i}")]
    return [*listed, "--upstream-root", str(local.trusted_root_path)]


def errors(doc: dict) -> dict[str, str]:
    return {w["filename"]: w["error"]["code"] for w in doc["wheels"] if w["error"]}


def test_a_pinned_root_verifies_and_records_the_upstream(src: Path, wheels: dict[str, Path], keys: tuple,
                                                         local: LocalSigstore, tmp_path: Path) -> None:
    """Attestations of the private Sigstore pass against its root and are recorded; PyPI's
    real one, signed under the production root, does not verify against it."""
    shutil.copy2(DATA / REAL, src / REAL)
    shutil.copy2(DATA / f"{REAL}.provenance", src / f"{REAL}.provenance")
    out = tmp_path / "out"
    code, doc, _ = run_mirror(src, out, keys[0], *pinned(local, VENDOR, PURE))
    backend, pure = wheels["backend"].name, wheels["pure"].name
    assert code == 1
    assert statuses(doc) == {backend: "migrated", pure: "copied", REAL: "failed"}
    rows = {w["filename"]: w for w in doc["wheels"]}
    assert rows[backend]["upstream"] == [{"issuer": GITHUB, "identity": VENDOR, "kind": "pep740"}]
    assert rows[pure]["upstream"] == [{"issuer": GITHUB, "identity": PURE, "kind": "pep740"}]
    assert errors(doc) == {REAL: "provenance.invalid"}
    # without it, Sigstore's production root (sigstore-python's shipped copy) verifies neither
    (src / REAL).unlink()
    code, doc, _ = run_mirror(src, tmp_path / "unpinned", keys[0], "--upstream-identity", f"{GITHUB}={VENDOR}",
                              "--upstream-identity", f"{GITHUB}={PURE}")
    assert code == 1 and errors(doc) == {backend: "provenance.invalid", pure: "provenance.invalid"}


def test_a_pinned_root_served_by_a_pep691_index(src: Path, wheels: dict[str, Path], keys: tuple,
                                                local: LocalSigstore, tmp_path: Path) -> None:
    tree = tmp_path / "index"
    backend = wheels["backend"].name
    project = tree / "simple" / "legacy-ep-backend"
    project.mkdir(parents=True)
    shutil.copy2(src / backend, project / backend)
    shutil.copy2(src / f"{backend}.provenance", project / "attestation.json")
    files = [{"filename": backend, "url": backend, "hashes": {"sha256": sha(src / backend)},
              "provenance": "attestation.json"}]
    (project / "index.json").write_text(json.dumps({"meta": {"api-version": "1.1"}, "files": files}))
    code, doc, _ = run_mirror(tree, tmp_path / "out", keys[0], *pinned(local, VENDOR))
    assert code == 0 and statuses(doc) == {backend: "migrated"}
    assert doc["wheels"][0]["upstream"][0]["identity"] == VENDOR


def test_an_unlisted_identity_under_the_pinned_root(src: Path, wheels: dict[str, Path], keys: tuple,
                                                    local: LocalSigstore, tmp_path: Path) -> None:
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], *pinned(local, VENDOR))
    assert code == 1 and statuses(doc)[wheels["backend"].name] == "migrated"
    (row,) = [w for w in doc["wheels"] if w["error"]]
    assert row["filename"] == wheels["pure"].name and row["error"]["code"] == "provenance.identity"
    assert PURE in row["error"]["message"]


def test_an_attestation_of_another_wheels_digest_is_invalid(src: Path, wheels: dict[str, Path], keys: tuple,
                                                            local: LocalSigstore, tmp_path: Path) -> None:
    """Signed by the listed identity under the pinned root, named as this wheel, but of the
    other wheel's sha256."""
    backend = src / wheels["backend"].name
    (src / f"{backend.name}.provenance").write_bytes(attest(local, backend, VENDOR, digest=sha(src /
                                                                                            wheels["pure"].name)))
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], *pinned(local, VENDOR, PURE))
    assert code == 1 and errors(doc) == {backend.name: "provenance.invalid"}
    assert "digest" in doc["wheels"][[w["filename"] for w in doc["wheels"]].index(backend.name)]["error"]["message"]
    assert statuses(doc)[wheels["pure"].name] == "copied"


def test_an_attestation_of_another_sigstore_is_invalid(src: Path, wheels: dict[str, Path], keys: tuple,
                                                       local: LocalSigstore, tmp_path: Path) -> None:
    """The same statement and identity, signed by a Sigstore the pinned root does not list."""
    stranger = make_local_sigstore(tmp_path / "stranger", seed="stranger", tsa=False)
    backend = src / wheels["backend"].name
    (src / f"{backend.name}.provenance").write_bytes(attest(stranger, backend, VENDOR))
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], *pinned(local, VENDOR, PURE))
    assert code == 1 and errors(doc) == {backend.name: "provenance.invalid"}
    assert "certificate chain" in str(doc["wheels"])
    # pinned to the stranger's root instead, that wheel passes and the other fails
    code, doc, _ = run_mirror(src, tmp_path / "out2", keys[0], *pinned(stranger, VENDOR, PURE))
    assert code == 1 and errors(doc) == {wheels["pure"].name: "provenance.invalid"}


def test_a_bad_root_is_a_usage_error_before_any_wheel(src: Path, keys: tuple, local: LocalSigstore,
                                                      tmp_path: Path) -> None:
    (tmp_path / "garbage.json").write_text('{"tlogs": [' * 3)
    (tmp_path / "not-a-root.json").write_text('{"mediaType": "application/json", "tlogs": "no"}')
    (tmp_path / "deep.json").write_text("[" * 100 + "]" * 100)
    for bad in ("missing.json", "garbage.json", "not-a-root.json", "deep.json", "."):
        out = tmp_path / "out"
        code, doc, _ = run_mirror(src, out, keys[0], "--upstream-identity", f"{GITHUB}={VENDOR}",
                                  "--upstream-root", str(tmp_path / bad))
        assert (code, doc["error"]["code"]) == (2, "input.upstream-root"), bad
        assert str(tmp_path / bad) in doc["error"]["path"]
        assert not out.exists()
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], "--upstream-root", str(local.trusted_root_path))
    assert (code, doc["error"]["code"]) == (2, "input.upstream-root")


def test_another_root_redoes_every_wheel(src: Path, wheels: dict[str, Path], keys: tuple, local: LocalSigstore,
                                         tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, doc, _ = run_mirror(src, out, keys[0], *pinned(local, VENDOR, PURE))
    assert code == 0
    code, doc, _ = run_mirror(src, out, keys[0], *pinned(local, VENDOR, PURE))
    assert code == 0 and set(statuses(doc).values()) == {"unchanged"}
    assert "upstream-root=" in (out / mirror.STATE_FILE).read_text()
    stranger = make_local_sigstore(tmp_path / "stranger", seed="stranger", tsa=False)
    code, doc, _ = run_mirror(src, out, keys[0], *pinned(stranger, VENDOR, PURE))
    assert code == 1 and set(errors(doc).values()) == {"provenance.invalid"}



def test_a_wheel_rewritten_in_place_after_its_check_is_never_served(src: Path, wheels: dict[str, Path], keys: tuple,
                                                                   local: LocalSigstore, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: its provenance verifies against the bytes hashed, then the file is rewritten
    in place (the inode the mirror holds open) with a planted module and a RECORD to match,
    before the migration reads it again. The output would carry the attested identity for
    bytes nobody attested: the wheel fails (``mirror.source-changed``), nothing of it is
    served; the other wheel is mirrored. (The real check runs; the attacker acts right after it.)"""
    from backend_packager.commands import mirrorwork
    from backend_packager.manifest import signing

    backend = src / wheels["backend"].name
    planted = rezip(backend, tmp_path / "planted.whl",
                    lambda members: members.update({"legacy_ep_backend/planted.py": b"EVIL = 1\n"})).read_bytes()
    check = mirrorwork.check_provenance

    def check_then_rewrite(data: bytes, filename: str, *args: object) -> object:
        found = check(data, filename, *args)  # type: ignore[arg-type]
        if filename == backend.name:
            with backend.open("r+b") as stream:
                stream.write(planted)
                stream.truncate()
        return found

    monkeypatch.setattr(mirrorwork, "check_provenance", check_then_rewrite)
    out = tmp_path / "out"
    run = mirror.mirror([src], out, signing.load(keys[0].private),
                        upstream=tuple(mirror.parse_upstream(f"{GITHUB}={i}") for i in (VENDOR, PURE)),
                        upstream_root=mirror.load_root(local.trusted_root_path))
    rows = {r.filename: r for r in run.results}
    assert rows[backend.name].status == "failed" and rows[backend.name].error is not None
    assert rows[backend.name].error["code"] == "mirror.source-changed" and not rows[backend.name].served
    assert rows[wheels["pure"].name].status == "copied"
    assert not (out / backend.name).exists() and not (out / "simple" / "legacy-ep-backend").exists()
