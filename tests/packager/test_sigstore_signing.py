"""Keyless signing in the packager: a Sigstore bundle over the manifest's statement, made with
``--sigstore`` or attached with ``--sigstore-bundle``, written beside the manifest.

The bundles here are real ones over the manifest's payload, made by the local test Sigstore
(``helpers.sigstoreca``: seeded CA, CT log and Rekor-like log) that sigstore's offline
``Verifier`` accepts; ``--sigstore`` itself needs Fulcio and Rekor on the network, so only its
refusals before any work are run here."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import adopted
from helpers.adopted import DIST_INFO, cli_adopt, key_file
from helpers.disttree import TrustEnv
from helpers.projects import Keypair, build_env, built_wheel, copy_example, keygen, python_build, record_hash
from helpers.sigstoreca import TEST_IDENTITY, TEST_ISSUER, LocalSigstore, make_local_sigstore
from helpers.wheels import backend_files, pip_install, write_wheel
from triton_backend_runtime.base import SIGSTORE_BUNDLE_FILENAME
from triton_backend_runtime.site import discovery
from triton_backend_runtime.verification.distribution import verify_distribution

from backend_packager.base import KeylessError
from backend_packager.manifest import keyless

#: The installed fork backend ``adopt`` signs (a pip install copied per test) and a trust env.
fork_wheel, pristine, site, trust = adopted.fork_wheel, adopted.pristine, adopted.site, adopted.trust

#: Where sigstore-python's ``detect_credential`` looks for a CI's ambient credential.
CI_VARIABLES = ("GITHUB_ACTIONS", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL",
                "GOOGLE_SERVICE_ACCOUNT_NAME", "BUILDKITE", "GITLAB_CI", "CIRCLECI", keyless.IDENTITY_TOKEN_ENV)


def environment(**extra: str) -> dict[str, str]:
    """This environment with no CI credential and a fixed SOURCE_DATE_EPOCH (same manifest, same payload)."""
    env = {k: v for k, v in os.environ.items() if k not in CI_VARIABLES}
    return {**env, "SOURCE_DATE_EPOCH": "1700000000", **extra}


def packager(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "backend-packager"
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env or environment())
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def dist_info_file(wheel: Path, name: str) -> str:
    return next(m for m in members(wheel) if m.endswith(f".dist-info/{name}"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = backend_files("keyless_backend", "KeylessBackend", "keyless")
    return write_wheel(tmp_path_factory.mktemp("src"), "keyless-backend", "1.0", files, {"keyless": "keyless_backend"})


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Keypair:
    return keygen(tmp_path_factory.mktemp("keys"), "keyless-test")


@pytest.fixture(scope="module")
def payload(wheel: Path, key: Keypair, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The statement payload of the wheel's manifest, as migrate signs it."""
    out = tmp_path_factory.mktemp("first")
    proc = packager("migrate", str(wheel), "-o", str(out), "--key", str(key.private))
    assert proc.returncode == 0, proc.stderr
    envelope = json.loads(members(out / wheel.name)[dist_info_file(out / wheel.name, "triton_backend.dsse.json")])
    return base64.b64decode(envelope["payload"])


@pytest.fixture(scope="module")
def sigstore(tmp_path_factory: pytest.TempPathFactory) -> LocalSigstore:
    return make_local_sigstore(tmp_path_factory.mktemp("sigstore"))


@pytest.fixture(scope="module")
def bundle(payload: bytes, sigstore: LocalSigstore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bundle") / "keyless.sigstore.json"
    path.write_bytes(sigstore.sign_dsse(payload, identity=TEST_IDENTITY, issuer=TEST_ISSUER))
    return path


def trusted(sigstore: LocalSigstore) -> list[str]:
    return ["--trust-identity", f"{TEST_ISSUER}={TEST_IDENTITY}", "--sigstore-root", str(sigstore.trusted_root_path)]


# -- --sigstore: refused before any work without a token ----------------------------------


def test_sigstore_without_a_token_fails_before_any_work(wheel: Path, key: Keypair, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = packager("migrate", str(wheel), "-o", str(out), "--key", str(key.private), "--sigstore")
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("(input.sigstore)"), proc.stderr
    assert "--identity-token FILE" in proc.stderr and keyless.IDENTITY_TOKEN_ENV in proc.stderr
    assert not out.exists()  # nothing opened, nothing written


def test_sigstore_with_an_empty_token_file_fails_before_any_work(wheel: Path, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_bytes(b"\n")
    proc = packager("migrate", str(wheel), "-o", str(tmp_path / "out"), "--sigstore", "--identity-token", str(token))
    assert proc.returncode == 2 and "(input.sigstore)" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["adopt", "mirror"])
def test_sigstore_without_a_token_on_adopt_and_mirror(command: str, key: Keypair, tmp_path: Path) -> None:
    target = "nonexistent-dist" if command == "adopt" else str(tmp_path)
    args = ["--site-packages", str(tmp_path)] if command == "adopt" else ["-o", str(tmp_path / "mirror")]
    proc = packager(command, target, *args, "--key", str(key.private), "--sigstore")
    assert proc.returncode == 2 and "(input.sigstore)" in proc.stderr, proc.stderr
    assert not (tmp_path / "mirror").exists()


def jwt(claims: dict[str, object]) -> str:
    """An unsigned JWT of ``claims`` (sigstore reads the claims before Fulcio checks the signature)."""
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


@pytest.mark.parametrize("token", ["not a token", "expired"])
def test_an_unusable_token_fails_before_any_work(token: str, wheel: Path, key: Keypair, tmp_path: Path) -> None:
    if token == "expired":
        token = jwt({"aud": "sigstore", "sub": "ci", "iss": TEST_ISSUER, "iat": 1600000000, "exp": 1600000600})
    out = tmp_path / "out"
    proc = packager("migrate", str(wheel), "-o", str(out), "--key", str(key.private), "--sigstore",
                    env=environment(**{keyless.IDENTITY_TOKEN_ENV: token}))
    assert proc.returncode == 2, proc.stderr
    assert f"{keyless.IDENTITY_TOKEN_ENV}: not a usable OIDC identity token" in proc.stderr
    assert proc.stderr.strip().endswith("(input.sigstore)") and token not in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("sigstore", [[], ["--sigstore"]])
def test_mirror_without_a_key_needs_sigstore_and_a_token(sigstore: list[str], wheel: Path, tmp_path: Path) -> None:
    proc = packager("mirror", str(wheel.parent), "-o", str(tmp_path / "mirror"), *sigstore)
    code = "input.sigstore" if sigstore else "input.key"
    assert proc.returncode == 2 and proc.stderr.strip().endswith(f"({code})"), proc.stderr
    assert not (tmp_path / "mirror").exists()


def test_identity_token_without_sigstore_is_a_usage_error(wheel: Path, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("x")
    proc = packager("migrate", str(wheel), "-o", str(tmp_path / "out"), "--identity-token", str(token))
    assert proc.returncode == 2 and "(input.usage)" in proc.stderr, proc.stderr


def test_build_with_sigstore_and_no_token_fails_before_the_inner_build(tmp_path: Path) -> None:
    # An inner backend that cannot be imported: reaching it would be another error.
    (tmp_path / "pyproject.toml").write_text(
        '[tool.backend-packager]\nbackends = [{ name = "demo", package = "demo_backend" }]\n'
        'inner-backend = "no_such_inner_backend"\nsigstore = true\n')
    proc = subprocess.run([sys.executable, "-c", "from backend_packager import build; build.build_wheel('dist')"],
                          cwd=tmp_path, capture_output=True, text=True, env=environment())
    assert proc.returncode != 0
    assert "tool.backend-packager.sigstore is true but there is no OIDC identity token" in proc.stderr, proc.stderr
    assert "no_such_inner_backend" not in proc.stderr
    assert not (tmp_path / "dist").exists()


def test_build_attaches_a_bundle_byte_identically(key: Keypair, sigstore: LocalSigstore, tmp_path: Path) -> None:
    project = copy_example("setuptools_backend", tmp_path / "src")
    first = built_wheel(project, tmp_path / "first", build_env(key))
    envelope = json.loads(members(first)[dist_info_file(first, "triton_backend.dsse.json")])
    bundle = tmp_path / "release.sigstore.json"
    bundle.write_bytes(sigstore.sign_dsse(base64.b64decode(envelope["payload"]), identity=TEST_IDENTITY,
                                          issuer=TEST_ISSUER))
    attached = build_env(key, BACKEND_PACKAGER_SIGSTORE_BUNDLE=str(bundle))
    wheels = [built_wheel(project, tmp_path / run, attached) for run in ("one", "two")]
    assert wheels[0].read_bytes() == wheels[1].read_bytes()
    assert members(wheels[0])[dist_info_file(wheels[0], SIGSTORE_BUNDLE_FILENAME)] == bundle.read_bytes()
    other = tmp_path / "other.sigstore.json"
    other.write_bytes(sigstore.sign_dsse(b'{"other": 1}', identity=TEST_IDENTITY, issuer=TEST_ISSUER))
    refused = python_build(project, tmp_path / "refused", "--wheel",
                           env=build_env(key, BACKEND_PACKAGER_SIGSTORE_BUNDLE=str(other)))
    assert refused.returncode != 0 and "the bundle signs another statement" in refused.stderr, refused.stderr[-2000:]


# -- --sigstore-bundle: attached, RECORD-listed, byte-identical ----------------------------


def test_bundle_of_the_manifest_is_written_listed_and_reproducible(
    wheel: Path, key: Keypair, bundle: Path, sigstore: LocalSigstore, tmp_path: Path
) -> None:
    outputs = []
    for run in ("one", "two"):
        proc = packager("migrate", str(wheel), "-o", str(tmp_path / run), "--key", str(key.private),
                        "--sigstore-bundle", str(bundle), "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["wheels"][0]["sigstore"] is True
        outputs.append(tmp_path / run / wheel.name)
    assert outputs[0].read_bytes() == outputs[1].read_bytes()
    files = members(outputs[0])
    name = dist_info_file(outputs[0], SIGSTORE_BUNDLE_FILENAME)
    assert files[name] == bundle.read_bytes()  # byte for byte as given
    record = files[name.rsplit("/", 1)[0] + "/RECORD"].decode()
    row = next(line for line in record.splitlines() if line.startswith(name + ","))
    digest = base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
    assert row == f"{name},sha256={digest},{len(files[name])}"
    # Both signatures count: the key's, and the identity's through the runtime's own check.
    proc = packager("verify", str(outputs[0]), "--trust", str(key.public), *trusted(sigstore), "--json")
    result = json.loads(proc.stdout)["wheels"][0]
    assert proc.returncode == 0 and result["ok"], proc.stdout
    assert len(result["signers"]) == 2 and result["sigstore"].startswith("verified: ")


def test_keyless_only_wheel_verifies_for_the_trusted_identity_alone(
    wheel: Path, bundle: Path, sigstore: LocalSigstore, tmp_path: Path
) -> None:
    proc = packager("migrate", str(wheel), "-o", str(tmp_path), "--sigstore-bundle", str(bundle))
    assert proc.returncode == 0, proc.stderr
    assert "signed by a sigstore bundle" in proc.stdout and "hash-only" not in proc.stderr
    output = tmp_path / wheel.name
    envelope = json.loads(members(output)[dist_info_file(output, "triton_backend.dsse.json")])
    assert envelope["signatures"] == []  # no key: the bundle is the signature
    assert packager("verify", str(output), *trusted(sigstore)).returncode == 0
    other = packager("verify", str(output), "--trust-identity", f"{TEST_ISSUER}=https://github.com/other/*",
                     "--sigstore-root", str(sigstore.trusted_root_path))
    assert other.returncode == 1 and "sigstore.identity" in other.stdout


def test_the_runtime_verifies_a_keyless_only_wheel_for_the_trusted_identity(
    wheel: Path, bundle: Path, sigstore: LocalSigstore, trust: TrustEnv, tmp_path: Path
) -> None:
    """What the packager writes is what import checks: installed by pip, the hash-only manifest
    and its bundle verify for an identity alone (no key trusted), with the local root pinned."""
    migrated = packager("migrate", str(wheel), "-o", str(tmp_path / "out"), "--sigstore-bundle", str(bundle))
    assert migrated.returncode == 0, migrated.stderr
    site = tmp_path / "site"
    pip_install(Path(sys.executable), tmp_path / "out" / wheel.name, site)
    (trust.trust / "vendor.pub").unlink()
    (trust.trust / "identities").write_text(f"{TEST_ISSUER} {TEST_IDENTITY}\n")
    shutil.copyfile(sigstore.trusted_root_path, trust.trust / "sigstore-root.json")
    dist = next(d for d in discovery.discover([str(site)], in_tree=False).distributions if d.key == "keyless-backend")
    verdict = verify_distribution(dist, trust.context())
    assert (verdict.status, verdict.problem) == ("verified", None), verdict.problem
    assert verdict.keyless is not None and verdict.keyless.san == TEST_IDENTITY


def test_verify_without_identities_checks_the_payload_only(
    wheel: Path, key: Keypair, bundle: Path, tmp_path: Path
) -> None:
    assert packager("migrate", str(wheel), "-o", str(tmp_path), "--key", str(key.private),
                    "--sigstore-bundle", str(bundle)).returncode == 0
    proc = packager("verify", str(tmp_path / wheel.name), "--trust", str(key.public), "--json")
    result = json.loads(proc.stdout)["wheels"][0]
    assert proc.returncode == 0 and result["sigstore"] == "payload matches; identity not checked"


def test_resigning_drops_the_bundle_it_does_not_replace(
    wheel: Path, key: Keypair, bundle: Path, tmp_path: Path
) -> None:
    assert packager("migrate", str(wheel), "-o", str(tmp_path / "signed"), "--key", str(key.private),
                    "--sigstore-bundle", str(bundle)).returncode == 0
    again = packager("migrate", str(tmp_path / "signed" / wheel.name), "-o", str(tmp_path / "again"),
                     "--key", str(key.private))
    assert again.returncode == 0, again.stderr
    assert not any(m.endswith(SIGSTORE_BUNDLE_FILENAME) for m in members(tmp_path / "again" / wheel.name))


# -- adopt: in place and -o ----------------------------------------------------------------


def test_adopt_attaches_the_bundle_in_place_and_drops_it_when_signed_again_without(
    site: Path, trust: TrustEnv, sigstore: LocalSigstore, tmp_path: Path
) -> None:
    key = str(key_file(trust))
    assert cli_adopt(site, "--key", key)[0] == 0
    envelope = json.loads((site / DIST_INFO / "triton_backend.dsse.json").read_bytes())
    bundle = tmp_path / "adopted.sigstore.json"
    bundle.write_bytes(sigstore.sign_dsse(base64.b64decode(envelope["payload"]), identity=TEST_IDENTITY,
                                          issuer=TEST_ISSUER))
    code, doc = cli_adopt(site, "--key", key, "--sigstore-bundle", str(bundle))
    assert code == 0, doc
    assert doc["distributions"][0]["sigstore"] is True
    written = site / DIST_INFO / SIGSTORE_BUNDLE_FILENAME
    assert written.read_bytes() == bundle.read_bytes()
    rows = {line.split(",")[0]: line.split(",")[1:] for line in (site / DIST_INFO / "RECORD").read_text().splitlines()}
    assert rows[f"{DIST_INFO}/{SIGSTORE_BUNDLE_FILENAME}"] == [record_hash(written.read_bytes()),
                                                                str(len(written.read_bytes()))]
    # -o: the same bundle in the written wheel, beside its manifest
    code, doc = cli_adopt(site, "--key", key, "--sigstore-bundle", str(bundle), "-o", str(tmp_path / "out"))
    assert code == 0, doc
    out = Path(doc["distributions"][0]["output"])
    assert members(out)[f"{DIST_INFO}/{SIGSTORE_BUNDLE_FILENAME}"] == bundle.read_bytes()
    # No key at all: the manifest hash-only, the bundle its signature, verified for the identity alone.
    code, doc = cli_adopt(site, "--sigstore-bundle", str(bundle))
    assert code == 0 and doc["distributions"][0]["signed_by"] is None, doc
    assert json.loads((site / DIST_INFO / "triton_backend.dsse.json").read_bytes())["signatures"] == []
    (trust.trust / "vendor.pub").unlink()
    (trust.trust / "identities").write_text(f"{TEST_ISSUER} {TEST_IDENTITY}\n")
    shutil.copyfile(sigstore.trusted_root_path, trust.trust / "sigstore-root.json")
    dist = next(d for d in discovery.discover([str(site)], in_tree=False).distributions if d.key == adopted.NAME)
    verdict = verify_distribution(dist, trust.context())
    assert (verdict.status, verdict.problem) == ("verified", None), verdict.problem
    assert cli_adopt(site)[0] == 2  # neither --key nor --sigstore: nothing to sign with
    # Signed again without it: the bundle (of a statement no longer guaranteed the manifest's) goes.
    code, doc = cli_adopt(site, "--key", key)
    assert code == 0, doc
    assert not written.exists()
    assert f"{DIST_INFO}/{SIGSTORE_BUNDLE_FILENAME}" not in (site / DIST_INFO / "RECORD").read_text()


# -- refusals by code ---------------------------------------------------------------------


def test_bundle_of_another_statement_is_refused(
    wheel: Path, key: Keypair, payload: bytes, sigstore: LocalSigstore, tmp_path: Path
) -> None:
    other = tmp_path / "other.json"
    other.write_bytes(sigstore.sign_dsse(payload.replace(b"1.0", b"1.1", 1), identity=TEST_IDENTITY,
                                         issuer=TEST_ISSUER))
    proc = packager("migrate", str(wheel), "-o", str(tmp_path / "out"), "--key", str(key.private),
                    "--sigstore-bundle", str(other), "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["wheels"][0]["error"]["code"] == "sigstore.statement"
    assert not (tmp_path / "out" / wheel.name).exists()


@pytest.mark.parametrize("garble", ["not-json", "not-a-bundle", "truncated", "message-signature"])
def test_garbled_bundle_is_refused_before_any_work(
    garble: str, wheel: Path, key: Keypair, bundle: Path, tmp_path: Path
) -> None:
    good = bundle.read_bytes()
    doc = json.loads(good)
    if garble == "message-signature":
        doc["messageSignature"] = {"messageDigest": {"algorithm": "SHA2_256", "digest": "AA=="}, "signature": "AA=="}
        del doc["dsseEnvelope"]
    data = {"not-json": b"{not json", "not-a-bundle": b'{"mediaType": "text/plain"}',
            "truncated": good[: len(good) // 2], "message-signature": json.dumps(doc).encode()}[garble]
    path = tmp_path / "garbled.json"
    path.write_bytes(data)
    out = tmp_path / "out"
    proc = packager("migrate", str(wheel), "-o", str(out), "--key", str(key.private), "--sigstore-bundle", str(path))
    assert proc.returncode != 0
    assert proc.stderr.strip().endswith("(sigstore.bundle)"), proc.stderr
    assert not out.exists()


def test_bundle_too_big_is_refused_unread(wheel: Path, key: Keypair, tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with open(path, "wb") as stream:
        stream.truncate(keyless.MAX_BUNDLE_BYTES + 1)  # sparse: nothing to read, and none read
    proc = packager("migrate", str(wheel), "-o", str(tmp_path / "out"), "--key", str(key.private),
                    "--sigstore-bundle", str(path))
    assert proc.returncode != 0 and proc.stderr.strip().endswith("(sigstore.bundle)"), proc.stderr
    assert not (tmp_path / "out").exists()


def test_sigstore_and_sigstore_bundle_together_is_a_usage_error(wheel: Path, bundle: Path, tmp_path: Path) -> None:
    proc = packager("migrate", str(wheel), "-o", str(tmp_path / "out"), "--sigstore", "--sigstore-bundle", str(bundle))
    assert proc.returncode == 2 and "(input.usage)" in proc.stderr, proc.stderr


def test_check_bundle_names_the_statement_and_the_bundle(payload: bytes, bundle: Path) -> None:
    keyless.check_bundle(bundle.read_bytes(), payload, "b")  # the right payload: no exception
    with pytest.raises(KeylessError) as raised:
        keyless.check_bundle(bundle.read_bytes(), payload + b" ", "b")
    assert raised.value.code == "sigstore.statement"
    with pytest.raises(KeylessError) as raised:
        keyless.check_bundle(b"[]", payload, "b")
    assert raised.value.code == "sigstore.bundle"
