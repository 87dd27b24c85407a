"""``mirror --sigstore-bundle DIR``: keyless-signed mirror outputs rebuilt byte for byte.

A first run signs with the key; the statement payload of its output is signed by the local
test Sigstore (:mod:`helpers.sigstoreca`), as ``--sigstore`` would have signed it, into
``DIR/<output wheel>.sigstore.json``. Runs with that directory attach the bundle instead of
signing, so each gives the same bytes; a wheel copied through needs no bundle.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest
from helpers import index
from helpers.cli import run_cli
from helpers.index import run_mirror, statuses
from helpers.sigstoreca import TEST_IDENTITY, TEST_ISSUER, LocalSigstore, make_local_sigstore
from triton_backend_runtime.base import SIGSTORE_BUNDLE_FILENAME

wheels, keys = index.wheels, index.keys


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> LocalSigstore:
    return make_local_sigstore(tmp_path_factory.mktemp("sigstore"), tsa=False)


@pytest.fixture
def src(tmp_path: Path, wheels: dict[str, Path]) -> Path:
    d = tmp_path / "src"
    d.mkdir()
    for kind in ("backend", "pure"):
        shutil.copy2(wheels[kind], d / wheels[kind].name)
    return d


def member(wheel: Path, name: str) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(next(m for m in archive.namelist() if m.endswith(f".dist-info/{name}")))


def payload(wheel: Path) -> bytes:
    """The statement payload of a mirror output's manifest envelope."""
    return base64.b64decode(json.loads(member(wheel, "triton_backend.dsse.json"))["payload"])


@pytest.fixture
def bundles(src: Path, wheels: dict[str, Path], keys: tuple, local: LocalSigstore, tmp_path: Path) -> Path:
    """DIR with the backend wheel's bundle over a first (key-signed) run's statement."""
    code, _, _ = run_mirror(src, tmp_path / "first", keys[0])
    assert code == 0
    name = wheels["backend"].name
    d = tmp_path / "bundles"
    d.mkdir()
    signed = local.sign_dsse(payload(tmp_path / "first" / name), identity=TEST_IDENTITY, issuer=TEST_ISSUER)
    (d / f"{name}.sigstore.json").write_bytes(signed)
    return d


def mirror_without_key(src: Path, out: Path, *extra: str) -> tuple[int, dict]:
    proc = run_cli("mirror", str(src), "-o", str(out), "--json", *extra)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_attached_bundles_rebuild_byte_identically(src: Path, wheels: dict[str, Path], keys: tuple, bundles: Path,
                                                   local: LocalSigstore, tmp_path: Path) -> None:
    backend, pure = wheels["backend"].name, wheels["pure"].name
    outputs = []
    for run in ("two", "three"):
        code, doc, _ = run_mirror(src, tmp_path / run, keys[0], "--sigstore-bundle", str(bundles))
        assert code == 0 and statuses(doc) == {backend: "migrated", pure: "copied"}, doc
        outputs.append(tmp_path / run)
    assert (outputs[0] / backend).read_bytes() == (outputs[1] / backend).read_bytes()
    assert member(outputs[0] / backend, SIGSTORE_BUNDLE_FILENAME) == (bundles / f"{backend}.sigstore.json").read_bytes()
    assert payload(outputs[0] / backend) == payload(tmp_path / "first" / backend)
    assert (outputs[0] / pure).read_bytes() == wheels["pure"].read_bytes()
    # keyless only (no key): a hash-only envelope and the bundle, byte for byte again
    runs = [mirror_without_key(src, tmp_path / run, "--sigstore-bundle", str(bundles)) for run in ("k1", "k2")]
    assert all(code == 0 for code, _ in runs), runs
    assert (tmp_path / "k1" / backend).read_bytes() == (tmp_path / "k2" / backend).read_bytes()
    assert json.loads(member(tmp_path / "k1" / backend, "triton_backend.dsse.json"))["signatures"] == []
    assert not [w for _, doc in runs for w in doc["wheels"] if w["error"]]
    verified = run_cli("verify", str(tmp_path / "k1" / backend), "--trust-identity", f"{TEST_ISSUER}={TEST_IDENTITY}",
                       "--sigstore-root", str(local.trusted_root_path))
    assert verified.returncode == 0, verified.stdout


def test_a_bundle_of_another_statement_fails_that_wheel(src: Path, wheels: dict[str, Path], keys: tuple,
                                                        bundles: Path, local: LocalSigstore, tmp_path: Path) -> None:
    backend, pure = wheels["backend"].name, wheels["pure"].name
    path = bundles / f"{backend}.sigstore.json"
    other = payload(tmp_path / "first" / backend).replace(b'"sha256"', b'"sha256" ', 1)
    path.write_bytes(local.sign_dsse(other, identity=TEST_IDENTITY, issuer=TEST_ISSUER))
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], "--sigstore-bundle", str(bundles))
    assert code == 1 and statuses(doc) == {backend: "failed", pure: "copied"}
    (row,) = [w for w in doc["wheels"] if w["error"]]
    assert row["error"]["code"] == "sigstore.statement" and not (tmp_path / "out" / backend).exists()


def test_a_migrated_wheel_without_its_bundle_fails(src: Path, wheels: dict[str, Path], keys: tuple, bundles: Path,
                                                   tmp_path: Path) -> None:
    """No bundle for it and no --sigstore to sign it now; the copied wheel needs none."""
    backend, pure = wheels["backend"].name, wheels["pure"].name
    (bundles / f"{backend}.sigstore.json").unlink()
    for extra in ((), ("--key", str(keys[0].private))):
        code, doc = mirror_without_key(src, tmp_path / f"out{len(extra)}", "--sigstore-bundle", str(bundles), *extra)
        assert code == 1 and statuses(doc) == {backend: "failed", pure: "copied"}, doc
        (row,) = [w for w in doc["wheels"] if w["error"]]
        assert row["error"]["code"] == "sigstore.bundle" and "--sigstore" in row["error"]["message"]
        assert not any("hash-only" in w for row in doc["wheels"] for w in row["warnings"])


def test_a_bundle_directory_that_is_not_one_is_a_usage_error(src: Path, keys: tuple, tmp_path: Path) -> None:
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], "--sigstore-bundle", str(tmp_path / "nowhere"))
    assert (code, doc["error"]["code"]) == (2, "input.missing") and not (tmp_path / "out").exists()


def test_the_state_records_each_wheels_bundle(src: Path, wheels: dict[str, Path], keys: tuple, bundles: Path,
                                              local: LocalSigstore, tmp_path: Path) -> None:
    """A re-run into the same OUTDIR reuses a wheel's result only with the same bundle: one
    added after a failure, swapped for another statement's, or removed, redoes that wheel; the
    copied wheel, which needs none, stays unchanged throughout."""
    backend, pure = wheels["backend"].name, wheels["pure"].name
    path = bundles / f"{backend}.sigstore.json"
    good = path.read_bytes()
    other = local.sign_dsse(payload(tmp_path / "first" / backend).replace(b'"sha256"', b'"sha256" ', 1),
                            identity=TEST_IDENTITY, issuer=TEST_ISSUER)
    out = tmp_path / "out"
    expected = [(None, "failed", "sigstore.bundle"), (good, "migrated", None), (good, "unchanged", None),
                (other, "failed", "sigstore.statement"), (good, "migrated", None), (None, "failed", "sigstore.bundle")]
    for n, (bundle, status, code) in enumerate(expected):
        if bundle is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(bundle)
        _, doc, _ = run_mirror(src, out, keys[0], "--sigstore-bundle", str(bundles))
        assert statuses(doc) == {backend: status, pure: "copied" if n == 0 else "unchanged"}, (n, doc)
        (row,) = [w for w in doc["wheels"] if w["filename"] == backend]
        assert (row["error"] or {}).get("code") == code, (n, row)
        assert (out / backend).exists() == (status != "failed"), n
    assert json.loads((out / ".mirror-state.json").read_text())["entries"][backend]["bundle_sha256"] is None


def test_a_copied_wheel_ignores_its_bundle(src: Path, wheels: dict[str, Path], keys: tuple, bundles: Path,
                                           local: LocalSigstore, tmp_path: Path) -> None:
    """A wheel with nothing Triton is copied through, unsigned: whatever DIR holds under its
    name (no bundle, another statement's bundle, a FIFO) plays no part."""
    backend, pure = wheels["backend"].name, wheels["pure"].name
    path = bundles / f"{pure}.sigstore.json"
    other = local.sign_dsse(payload(tmp_path / "first" / backend), identity=TEST_IDENTITY, issuer=TEST_ISSUER)
    for n, make in enumerate((lambda: path.write_bytes(b"not a bundle"), lambda: path.write_bytes(other),
                              lambda: os.mkfifo(path))):
        path.unlink(missing_ok=True)
        make()
        code, doc, _ = run_mirror(src, tmp_path / f"out{n}", keys[0], "--sigstore-bundle", str(bundles))
        assert code == 0 and statuses(doc) == {backend: "migrated", pure: "copied"}, (n, doc)
        assert (tmp_path / f"out{n}" / pure).read_bytes() == wheels["pure"].read_bytes()


def test_a_symlinked_bundle_is_refused(src: Path, wheels: dict[str, Path], keys: tuple, bundles: Path,
                                       tmp_path: Path) -> None:
    """DIR is read as the other inputs are: a bundle that is a symlink (to the right bundle,
    elsewhere) is not followed; that wheel fails."""
    backend = wheels["backend"].name
    path = bundles / f"{backend}.sigstore.json"
    elsewhere = Path(shutil.copy2(path, tmp_path / "elsewhere.json"))
    path.unlink()
    path.symlink_to(elsewhere)
    code, doc, _ = run_mirror(src, tmp_path / "out", keys[0], "--sigstore-bundle", str(bundles))
    assert code == 1 and statuses(doc)[backend] == "failed"
    (row,) = [w for w in doc["wheels"] if w["error"]]
    assert row["error"]["code"] == "sigstore.bundle" and "symbolic link" in row["error"]["message"]
