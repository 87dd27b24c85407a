"""`backend-packager verify` and `inspect` on real built wheels, untouched and tampered with."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.projects import Keypair, keygen, rezip
from helpers.wheelcheck import assert_vouches_for_every_file, vouched_members
from triton_backend_runtime.manifest.model import MANIFEST_FILENAME
from triton_backend_runtime.trust import dsse

from backend_packager.manifest import signing

DRIVER = "demo_backend/lib/libdemo_driver.so"
COMPILER = "demo_backend/compiler.py"


@pytest.fixture(scope="module")
def wheel(example_wheels: dict[str, Path]) -> Path:
    return example_wheels["setuptools_backend"]


@pytest.fixture(scope="module")
def other_key(tmp_path_factory: pytest.TempPathFactory) -> Keypair:
    return keygen(tmp_path_factory.mktemp("other"), "other")


def verify(wheel: Path, key: Keypair, *extra: str) -> tuple[int, list[str]]:
    result = run_cli("verify", str(wheel), "--trust", str(key.public), *extra)
    assert not result.stderr, result.stderr
    return result.returncode, result.stdout.splitlines()


def failures(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("FAIL")]


def manifest_name(members: dict[str, bytes]) -> str:
    return next(n for n in members if n.endswith(f".dist-info/{MANIFEST_FILENAME}"))


def test_built_wheel_verifies(wheel: Path, signing_key: Keypair) -> None:
    code, lines = verify(wheel, signing_key)
    assert code == 0
    count = len(vouched_members(wheel))
    assert lines == [f"OK   {wheel}: signed by {_keyid(signing_key)[:16]} (vendor); {count} artifacts match "
                     "(coverage all)"]


def test_verify_json(wheel: Path, signing_key: Keypair) -> None:
    result = run_cli("verify", str(wheel), "--trust", str(signing_key.public), "--json")
    doc = json.loads(result.stdout)
    assert result.returncode == 0
    assert doc["wheels"][0]["ok"] is True and doc["wheels"][0]["findings"] == []
    assert doc["wheels"][0]["signers"] == [_keyid(signing_key)]
    assert doc["wheels"][0]["coverage"] == "all" and doc["wheels"][0]["notes"] == []


@pytest.mark.parametrize("example", ["setuptools_backend", "scikit_build_backend"])
def test_built_manifest_vouches_for_every_file(example: str, example_wheels: dict[str, Path]) -> None:
    manifest = assert_vouches_for_every_file(example_wheels[example])
    paths = {a["path"] for a in manifest["artifacts"]}
    dist_info = next(p.split("/")[0] for p in paths if ".dist-info/" in p)
    # Sources, the metadata kept from the inner build, and the entry points written here.
    assert {f"{dist_info}/METADATA", f"{dist_info}/WHEEL", f"{dist_info}/entry_points.txt"} <= paths
    assert any(p.endswith("/compiler.py") for p in paths) and any(p.endswith("/driver.py") for p in paths)
    assert f"{dist_info}/RECORD" not in paths and f"{dist_info}/{MANIFEST_FILENAME}" not in paths


# -- every file, not only libraries: tampering by reason code --------------------------------


def codes_of(wheel: Path, key: Keypair) -> list[tuple[str, str]]:
    result = run_cli("verify", str(wheel), "--trust", str(key.public), "--json")
    doc = json.loads(result.stdout)["wheels"][0]
    assert result.returncode == (0 if doc["ok"] else 1)
    return [(f["code"], f["path"]) for f in doc["findings"]]


def test_edited_source_with_record_regenerated(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    def backdoor(members: dict[str, bytes]) -> None:
        members[COMPILER] += b"\nimport os; os.system('id')\n"

    # RECORD is rewritten to match, so only the signed manifest can tell.
    tampered = rezip(wheel, tmp_path / wheel.name, backdoor)
    assert codes_of(tampered, signing_key) == [("artifact.sha256", COMPILER), ("artifact.size", COMPILER)]


def test_edited_metadata_with_record_regenerated(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    def edit(members: dict[str, bytes]) -> None:
        name = next(n for n in members if n.endswith(".dist-info/METADATA"))
        members[name] = members[name].replace(b"Version: 0.1.0", b"Version: 0.1.0\nRequires-Dist: evil")

    (finding,) = codes_of(rezip(wheel, tmp_path / wheel.name, edit), signing_key)[:1]
    assert finding[0] == "artifact.sha256" and finding[1].endswith(".dist-info/METADATA")


@pytest.mark.parametrize("added", ["demo_backend/sitecustomize.py", "demo_backend/lib/libdevice.10.bc",
                                   "demo_triton_backend-0.1.0.data/scripts/ptxas"])
def test_added_file_is_unlisted(added: str, wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    def smuggle(members: dict[str, bytes]) -> None:
        members[added] = b"print('not signed')\n"

    assert codes_of(rezip(wheel, tmp_path / wheel.name, smuggle), signing_key) == [("artifact.unlisted", added)]


def test_files_installers_write_are_not_vouched_for(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    def install_marks(members: dict[str, bytes]) -> None:
        dist_info = next(n for n in members if n.endswith(".dist-info/METADATA")).split("/")[0]
        for leaf in ("INSTALLER", "REQUESTED", "direct_url.json"):
            members[f"{dist_info}/{leaf}"] = b"pip\n"

    assert codes_of(rezip(wheel, tmp_path / wheel.name, install_marks), signing_key) == []


def test_removed_file_is_missing(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    assert codes_of(rezip(wheel, tmp_path / wheel.name, lambda m: m.pop(COMPILER)), signing_key) == [
        ("artifact.missing", COMPILER)
    ]


# -- a manifest written before every file was covered (schema 1.0) -----------------------------


def native_only(wheel: Path, key: Keypair, out: Path) -> Path:
    """The wheel re-signed with a manifest as schema 1.0 wrote it: native artifacts only, no
    ``coverage`` field at all (written by hand: today's writer cannot produce it)."""
    private = signing.load(key.private)

    def downgrade(members: dict[str, bytes]) -> None:
        name = manifest_name(members)
        statement = json.loads(dsse.decode(members[name], name).payload)
        predicate = statement["predicate"]
        predicate["artifacts"] = [a for a in predicate["artifacts"] if a["elf"] is not None]
        predicate["schema_version"] = "1.0"
        del predicate["coverage"]
        statement["subject"] = [{"name": a["path"], "digest": {"sha256": a["sha256"]}} for a in predicate["artifacts"]]
        body = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
        sig = private.private.sign(dsse.pae(dsse.PAYLOAD_TYPE, body))
        signature = dsse.Signature(private.public.keyid, sig)
        members[name] = dsse.encode(dsse.Envelope(body, dsse.PAYLOAD_TYPE, (signature,)))

    return rezip(wheel, out, downgrade)


def test_schema_1_0_manifest_still_verifies_with_a_note(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    old = native_only(wheel, signing_key, tmp_path / wheel.name)
    code, lines = verify(old, signing_key)
    assert code == 0
    assert lines[0].endswith("1 artifacts match (coverage native)")
    assert lines[1].startswith(f"NOTE {old}: coverage native: the manifest (schema 1.0) vouches for native files only")
    doc = json.loads(run_cli("verify", str(old), "--trust", str(signing_key.public), "--json").stdout)["wheels"][0]
    assert doc["ok"] is True and doc["findings"] == [] and doc["coverage"] == "native"
    assert doc["notes"] and "native files only" in doc["notes"][0]
    shown = run_cli("inspect", str(old)).stdout
    assert "coverage:   native (native files only" in shown and "schema 1.0" in shown
    assert json.loads(run_cli("inspect", "--json", str(old)).stdout)["wheels"][0]["coverage"] == "native"


def test_schema_1_0_manifest_keeps_todays_checks(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    old = native_only(wheel, signing_key, tmp_path / "old" / wheel.name)

    def both(members: dict[str, bytes]) -> None:
        members[COMPILER] += b"\n# edited\n"  # not covered by a native-only manifest: RECORD alone
        members["demo_backend/lib/libextra.so"] = members[DRIVER]

    tampered = rezip(old, tmp_path / wheel.name, both)
    assert codes_of(tampered, signing_key) == [("artifact.unlisted", "demo_backend/lib/libextra.so")]


def test_schema_1_0_wheel_migrates_to_full_coverage(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    old = native_only(wheel, signing_key, tmp_path / "old" / wheel.name)
    proc = run_cli("migrate", str(old), "-o", str(tmp_path / "new"), "--key", str(signing_key.private))
    assert proc.returncode == 0, proc.stderr
    assert_vouches_for_every_file(tmp_path / "new" / wheel.name)
    assert verify(tmp_path / "new" / wheel.name, signing_key)[0] == 0


def test_flipped_byte_in_library(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    def flip(members: dict[str, bytes]) -> None:
        data = bytearray(members[DRIVER])
        data[len(data) // 2] ^= 0xFF
        members[DRIVER] = bytes(data)

    # RECORD rewritten to match: only the signed manifest can tell.
    code, lines = verify(rezip(wheel, tmp_path / wheel.name, flip), signing_key)
    assert code == 1
    assert len(failures(lines)) == 1
    assert f"artifact.sha256: {DRIVER}: sha256 " in lines[0] and "differs from the signed manifest's" in lines[0]


def test_flipped_byte_with_stale_record(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    def flip(members: dict[str, bytes]) -> None:
        members[DRIVER] = members[DRIVER][:100] + bytes([members[DRIVER][100] ^ 1]) + members[DRIVER][101:]

    code, lines = verify(rezip(wheel, tmp_path / wheel.name, flip, fix_record=False), signing_key)
    assert code == 1
    codes = sorted(line.split(": ")[1] for line in failures(lines))
    assert codes == ["artifact.sha256", "record.mismatch"]


def test_manifest_edited(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    def loosen(members: dict[str, bytes]) -> None:
        name = manifest_name(members)
        envelope = dsse.decode(members[name], name)
        payload = envelope.payload.replace(b'"triton":">=3.9,<3.10"', b'"triton":""')
        assert payload != envelope.payload
        members[name] = dsse.encode(dsse.Envelope(payload, envelope.payload_type, envelope.signatures))

    code, lines = verify(rezip(wheel, tmp_path / wheel.name, loosen), signing_key)
    assert code == 1
    assert failures(lines) == [
        f"FAIL {tmp_path / wheel.name}: signature.signature: {_manifest_path(wheel)}: 0 of 1 required signatures "
        f"valid: signature by key {_keyid(signing_key)[:16]} does not match the manifest"
    ]


def test_signature_removed(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    def strip(members: dict[str, bytes]) -> None:
        name = manifest_name(members)
        envelope = dsse.decode(members[name], name)
        members[name] = dsse.encode(dsse.Envelope(envelope.payload, envelope.payload_type, ()))

    code, lines = verify(rezip(wheel, tmp_path / wheel.name, strip), signing_key)
    assert code == 1
    assert len(failures(lines)) == 1
    assert "signature.unsigned" in lines[0] and "the manifest is not signed (hash-only)" in lines[0]


def test_manifest_deleted(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    code, lines = verify(rezip(wheel, tmp_path / wheel.name, lambda m: m.pop(manifest_name(m))), signing_key)
    assert code == 1
    assert "manifest.missing" in failures(lines)[0]


def test_signed_by_another_key(wheel: Path, signing_key: Keypair, other_key: Keypair, tmp_path: Path) -> None:
    impostor = signing.load(other_key.private)

    def resign(members: dict[str, bytes]) -> None:
        name = manifest_name(members)
        envelope = dsse.decode(members[name], name)
        sig = impostor.private.sign(dsse.pae(envelope.payload_type, envelope.payload))
        members[name] = dsse.encode(
            dsse.Envelope(envelope.payload, envelope.payload_type, (dsse.Signature(impostor.public.keyid, sig),))
        )

    tampered = rezip(wheel, tmp_path / wheel.name, resign)
    code, lines = verify(tampered, signing_key)
    assert code == 1
    assert len(failures(lines)) == 1
    assert f"signature.signature: {_manifest_path(wheel)}: 0 of 1 required signatures valid: key " \
           f"{impostor.public.keyid[:16]} is not trusted" in lines[0]
    # The same wheel verifies for whoever trusts the other key: the check is the key, not the bytes.
    assert verify(tampered, other_key)[0] == 0


def test_extra_library_added(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    def smuggle(members: dict[str, bytes]) -> None:
        members["demo_backend/lib/libextra.so"] = members[DRIVER]
        members["demo_backend/helper.bin"] = members[DRIVER]  # ELF by content, whatever the name

    code, lines = verify(rezip(wheel, tmp_path / wheel.name, smuggle), signing_key)
    assert code == 1
    assert [line.split(": ", 2)[2] for line in failures(lines)] == [
        "demo_backend/helper.bin: shared library not listed in the signed manifest",
        "demo_backend/lib/libextra.so: shared library not listed in the signed manifest",
    ]


def test_renamed_to_another_version(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    renamed = tmp_path / wheel.name.replace("-0.1.0-", "-0.2.0-")
    shutil.copyfile(wheel, renamed)
    code, lines = verify(renamed, signing_key)
    assert code == 1
    assert failures(lines) == [
        f"FAIL {renamed}: identity.version: {renamed.name}: file name says version 0.2.0; "
        "the signed manifest says 0.1.0"
    ]


def test_entry_point_redirected(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    def redirect(members: dict[str, bytes]) -> None:
        name = next(n for n in members if n.endswith("entry_points.txt"))
        members[name] = b"[triton.backends]\ndemo = evil_backend\n"

    code, lines = verify(rezip(wheel, tmp_path / wheel.name, redirect), signing_key)
    assert code == 1
    # The file itself is signed (its sha256), and so is what it must say (the backends).
    # (evil_backend is as long as demo_backend: the sizes agree, the hashes do not.)
    assert [line.split(": ")[1] for line in failures(lines)] == ["artifact.sha256", "entry-point.mismatch"]
    assert "demo = evil_backend" in failures(lines)[1]


def test_every_failure_on_its_own_line(wheel: Path, signing_key: Keypair, tmp_path: Path) -> None:
    def several(members: dict[str, bytes]) -> None:
        members[DRIVER] = members[DRIVER] + b"\0"
        members["demo_backend/lib/libextra.so"] = members[DRIVER]

    tampered = rezip(wheel, tmp_path / wheel.name.replace("-0.1.0-", "-9.0-"), several)
    result = run_cli("verify", str(tampered), "--trust", str(signing_key.public), "--json")
    codes = [f["code"] for f in json.loads(result.stdout)["wheels"][0]["findings"]]
    assert result.returncode == 1
    assert codes == ["identity.version", "artifact.sha256", "artifact.size", "artifact.unlisted"]


def test_unreadable_inputs(tmp_path: Path, signing_key: Keypair) -> None:
    junk = tmp_path / "junk-1.0-py3-none-any.whl"
    junk.write_text("not a zip")
    code, lines = verify(junk, signing_key)
    assert code == 1 and "wheel.not-zip" in lines[0]
    result = run_cli("verify", str(junk), "--trust", str(tmp_path / "absent.pub"))
    assert result.returncode == 2 and "absent.pub: cannot open" in result.stderr
    assert "(input.missing)" in result.stderr


def test_inspect(wheel: Path, signing_key: Keypair) -> None:
    result = run_cli("inspect", str(wheel))
    assert result.returncode == 0
    text = result.stdout
    assert text.startswith("demo-triton-backend 0.1.0  (cp311-") or text.startswith("demo-triton-backend 0.1.0  (cp")
    assert f"signed by {_keyid(signing_key)[:16]} (not checked here" in text
    assert "demo = demo_backend  targets: demo" in text
    assert "compiler: demo_backend.compiler:DemoBackend" in text
    assert "driver: demo_backend.driver:DemoDriver" in text
    assert "requires:   triton >=3.9,<3.10" in text
    assert "coverage:   all (every file but RECORD" in text
    assert f"  {DRIVER}  " in text and f"  {COMPILER}  " in text


def test_inspect_json_plugin(example_wheels: dict[str, Path]) -> None:
    result = run_cli("inspect", str(example_wheels["scikit_build_backend"]), "--json")
    doc = json.loads(result.stdout)["wheels"][0]
    assert doc["signed"] is True and doc["verified"] is False
    assert doc["coverage"] == doc["manifest"]["coverage"] == "all" and doc["manifest"]["schema_version"] == "1.6"
    (plugin,) = doc["manifest"]["plugins"]
    assert (plugin["path"], plugin["api"], plugin["name"]) == ("skdemo_backend/lib/libskdemo_plugin.so", "v2", "skdemo")
    assert plugin["info"]["captured"] is True and plugin["contract"]["on_failure"] == "fail"


def _keyid(key: Keypair) -> str:
    return key.public.read_text().split()[2]


def _manifest_path(wheel: Path) -> str:
    return f"demo_triton_backend-0.1.0.dist-info/{MANIFEST_FILENAME}"
